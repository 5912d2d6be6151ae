"""Samplers: ``SeedableRandomSampler`` and ``BatchSamplerShard``.

``BatchSamplerShard`` hands each process its own batches of a batch sampler that every process
iterates identically. With ``even_batches`` the processes that run out first loop back to the
start of the data, so every process yields the same number of batches of the same size; the
real samples of a step then always come first when the per-process batches are concatenated in
process order, and ``remainder`` says how many there are.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Iterator, Sized
from typing import Any

import torch
from torch.utils.data import BatchSampler, RandomSampler, Sampler


def _random_sampler_arguments(
    data_source: Sized,
    replacement: bool = False,
    num_samples: int | None = None,
    generator: torch.Generator | None = None,
) -> dict[str, Any]:
    return {
        "data_source": data_source,
        "replacement": replacement,
        "num_samples": num_samples,
        "generator": generator,
    }


def _bind_random_sampler(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    try:
        return _random_sampler_arguments(*args, **kwargs)
    except TypeError as err:
        raise TypeError(
            "SeedableRandomSampler takes RandomSampler's arguments (data_source, replacement, "
            f"num_samples, generator) and data_seed by name; {err}. Fix the call."
        ) from None


class SeedableRandomSampler(RandomSampler):
    """A ``RandomSampler`` whose order depends only on a seed and the epoch.

    Each pass draws its permutation from a generator seeded with ``initial_seed + epoch``, so
    every process draws the same order, and a resumed run draws the order of the epoch it
    resumes. A pass that runs to its end moves to the next epoch; ``set_epoch`` overrides it.

    Takes ``RandomSampler``'s arguments (positional or by name) plus ``data_seed`` by name:

    - ``data_source``: the dataset (only its length is used);
    - ``replacement``: draw with replacement;
    - ``num_samples``: number of samples per pass (default: the dataset length);
    - ``generator``: only read for its initial seed when ``data_seed`` is None;
    - ``data_seed``: the seed; None uses ``generator.initial_seed()`` or torch's initial seed.
    """

    def __init__(self, *args: Any, data_seed: int | None = None, **kwargs: Any) -> None:
        bound = _bind_random_sampler(args, kwargs)
        super().__init__(
            bound["data_source"], replacement=bound["replacement"], num_samples=bound["num_samples"]
        )
        generator = bound["generator"]
        if data_seed is not None:
            self.initial_seed = int(data_seed)
        elif generator is not None:
            self.initial_seed = int(generator.initial_seed())
        else:
            self.initial_seed = int(torch.random.initial_seed())
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Select the permutation of ``epoch``."""
        self.epoch = int(epoch)

    def __iter__(self) -> Iterator[int]:
        generator = torch.Generator()
        generator.manual_seed(self.initial_seed + self.epoch)
        self.generator = generator
        yield from super().__iter__()
        self.epoch += 1


def batch_sampler_length(batch_sampler: Iterable) -> int:
    """``len`` of a batch sampler, with an error that says what is missing."""
    try:
        return len(batch_sampler)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(
            f"the batch sampler {type(batch_sampler).__name__} has no len(); a prepared "
            "map-style DataLoader needs one. Give the batch sampler a __len__."
        ) from None


class BatchSamplerShard(BatchSampler):
    """The batches of one process out of a batch sampler shared by ``num_processes`` processes.

    Without ``split_batches``, process ``i`` takes batches ``i``, ``i + n``, ``i + 2n`` ...;
    with it, every batch is cut into ``n`` equal parts and process ``i`` takes part ``i``.

    Args:
        batch_sampler: The batch sampler every process iterates in the same order.
        num_processes: Number of processes ``n``.
        process_index: Index of this process.
        split_batches: Cut each batch into ``n`` parts instead of dealing whole batches.
        even_batches: Loop back to the start of the data so that every process yields the same
            number of batches of the same size (ignored when the batch sampler drops its last
            batch: every process then gets only complete steps).

    Attributes:
        remainder: After a pass, the number of real samples in the last step over all processes
            (-1 before the first pass ends).
    """

    def __init__(
        self,
        batch_sampler: Iterable[list[int]],
        num_processes: int = 1,
        process_index: int = 0,
        split_batches: bool = False,
        even_batches: bool = True,
    ) -> None:
        if num_processes < 1 or not 0 <= process_index < num_processes:
            raise ValueError(
                f"process_index must lie in [0, num_processes); got process_index="
                f"{process_index}, num_processes={num_processes}. Pass the rank and world size."
            )
        batch_size = getattr(batch_sampler, "batch_size", None)
        if split_batches and num_processes > 1:
            if batch_size is None:
                raise ValueError(
                    f"split_batches needs a batch sampler with a batch_size; "
                    f"{type(batch_sampler).__name__} has none. Use split_batches=False."
                )
            if batch_size % num_processes != 0:
                raise ValueError(
                    f"split_batches needs a batch size that is a round multiple of the number "
                    f"of processes; got batch_size={batch_size}, num_processes={num_processes}. "
                    f"Use a batch size of {math.ceil(batch_size / num_processes) * num_processes} "
                    "or split_batches=False."
                )
        self.batch_sampler = batch_sampler
        self.sampler = getattr(batch_sampler, "sampler", None)  # type: ignore[assignment]
        self.batch_size = batch_size  # type: ignore[assignment]
        self.drop_last = bool(getattr(batch_sampler, "drop_last", False))
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.remainder = -1
        self.last_step_size = -1
        self._skip_next = 0

    # ---------------------------------------------------------------------------- sizes
    @property
    def total_batch_size(self) -> int | None:
        """Samples in one step over all processes (None for batch samplers of no fixed size)."""
        if self.batch_size is None:
            return None
        return self.batch_size if self.split_batches else self.batch_size * self.num_processes

    def _full_length(self) -> int:
        length = batch_sampler_length(self.batch_sampler)
        n, i = self.num_processes, self.process_index
        if n == 1:
            return length
        if self.split_batches:
            if self.even_batches or self.drop_last or self.batch_size is None:
                return length
            last = _last_batch_size(self.batch_sampler)
            per = self.batch_size // n
            return length - 1 if last is not None and last <= per * i else length
        if self.drop_last:
            return length // n
        if self.even_batches:
            return math.ceil(length / n)
        return length // n + (1 if i < length % n else 0)

    def __len__(self) -> int:
        return max(0, self._full_length() - self._skip_next)

    # ------------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[list[int]]:
        skip, self._skip_next = self._skip_next, 0
        self.remainder = -1
        self.last_step_size = -1
        if self.num_processes == 1:
            batches = self._iter_single()
        elif self.split_batches:
            batches = self._iter_split()
        elif self.batch_size is None:
            batches = self._iter_deal_variable()
        else:
            batches = self._iter_deal()
        yield from itertools.islice(batches, skip, None)

    def _note_step(self, real: int, size: int) -> None:
        self.remainder = real
        self.last_step_size = size

    def _iter_single(self) -> Iterator[list[int]]:
        for batch in self.batch_sampler:
            self._note_step(len(batch), len(batch))
            yield batch

    def _iter_split(self) -> Iterator[list[int]]:
        n, i = self.num_processes, self.process_index
        size = self.batch_size
        assert size is not None
        per = size // n
        first: list[int] | None = None
        for batch in self.batch_sampler:
            batch = list(batch)
            if first is None:
                first = batch
            if len(batch) < size and self.even_batches:
                real = len(batch)
                batch = batch + _cycle_take(first, size - len(batch))
                self._note_step(real, size)
            else:
                self._note_step(len(batch), len(batch))
            part = batch[per * i : per * (i + 1)]
            if part or self.even_batches:
                yield part

    def _iter_deal(self) -> Iterator[list[int]]:
        n, i = self.num_processes, self.process_index
        target = self.batch_size
        assert target is not None
        initial: list[int] = []
        step: list[list[int]] = []
        for batch in self.batch_sampler:
            batch = list(batch)
            if len(initial) < n * target:
                initial.extend(batch)
            step.append(batch)
            if len(step) == n:
                if len(batch) == target:
                    self._note_step(sum(map(len, step)), sum(map(len, step)))
                    yield step[i]
                else:
                    yield from self._last_step(step, initial, target)
                step = []
        if step and not self.drop_last:
            yield from self._last_step(step, initial, target)

    def _iter_deal_variable(self) -> Iterator[list[int]]:
        # Batches of no fixed size: deal them whole; an incomplete last round is completed
        # (even_batches) with whole batches from the start, so every process gets as many
        # batches, not as many samples.
        n, i = self.num_processes, self.process_index
        first: list[list[int]] = []
        step: list[list[int]] = []
        for batch in self.batch_sampler:
            batch = list(batch)
            if len(first) < n:
                first.append(batch)
            step.append(batch)
            if len(step) == n:
                self._note_step(sum(map(len, step)), sum(map(len, step)))
                yield step[i]
                step = []
        if not step or self.drop_last:
            return
        real = sum(map(len, step))
        if self.even_batches:
            step = step + list(itertools.islice(itertools.cycle(first), n - len(step)))
        self._note_step(real, sum(map(len, step)))
        if i < len(step) and step[i]:
            yield step[i]

    def _last_step(
        self, step: list[list[int]], initial: list[int], target: int
    ) -> Iterator[list[int]]:
        n, i = self.num_processes, self.process_index
        real = sum(map(len, step))
        if not self.even_batches:
            self._note_step(real, real)
            if i < len(step):
                yield step[i]
            return
        fill = itertools.cycle(initial)
        padded = [b + list(itertools.islice(fill, target - len(b))) for b in step]
        padded += [list(itertools.islice(fill, target)) for _ in range(n - len(step))]
        self._note_step(real, n * target)
        yield padded[i]


def _cycle_take(source: list[int], count: int) -> list[int]:
    return list(itertools.islice(itertools.cycle(source), count))


def _last_batch_size(batch_sampler: Iterable) -> int | None:
    sampler = getattr(batch_sampler, "sampler", None)
    size = getattr(batch_sampler, "batch_size", None)
    if sampler is None or size is None:
        return None
    try:
        total = len(sampler)
    except TypeError:
        return None
    return total % size or size


def set_sampler_epoch(sampler: Sampler | Iterable | None, epoch: int) -> None:
    """Call ``set_epoch(epoch)`` on a batch sampler, the batch samplers it wraps and their
    samplers: on each of them that has one, once."""
    seen: set[int] = set()
    pending = [sampler]
    while pending:
        item = pending.pop(0)
        if item is None or id(item) in seen:
            continue
        seen.add(id(item))
        set_epoch = getattr(item, "set_epoch", None)
        if callable(set_epoch):
            set_epoch(epoch)
        pending.append(getattr(item, "batch_sampler", None))
        pending.append(getattr(item, "sampler", None))

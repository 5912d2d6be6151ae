"""``IterableDatasetShard``: the samples of one process out of an iterable dataset."""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator
from typing import Any

import torch
from torch.utils.data import IterableDataset


class IterableDatasetShard(IterableDataset):
    """Every process reads the whole stream and keeps its own part of each step.

    The stream is cut into steps of ``batch_size * num_processes`` samples (``batch_size`` with
    ``split_batches``); process ``i`` keeps the ``i``-th slice of each step, so a DataLoader
    over this shard with the per-process batch size yields the process's batches. When the
    stream ends inside a step, ``drop_last`` drops it; otherwise, with ``even_batches``, the step
    is completed with samples from the start of the stream so every process gets a full batch,
    and ``remainder`` records how many samples of that step are real.

    Args:
        dataset: The iterable dataset.
        batch_size: Per-process batch size, or the global one with ``split_batches``.
        drop_last: Drop a final incomplete step.
        num_processes: Number of processes.
        process_index: Index of this process.
        split_batches: ``batch_size`` is the global batch size.
        even_batches: Complete the final step from the start of the stream.

    A dataset without ``set_epoch`` whose ``generator`` attribute is a ``torch.Generator`` has it
    reseeded with the epoch at the start of each pass, so that every process reads the same
    stream.

    Note:
        With ``num_workers > 0`` each worker iterates its own copy and ``remainder`` is only
        known inside the workers; prefer dispatching (``dispatch_batches=True``) then.
    """

    def __init__(
        self,
        dataset: Any,
        batch_size: int = 1,
        drop_last: bool = False,
        num_processes: int = 1,
        process_index: int = 0,
        split_batches: bool = False,
        *,
        even_batches: bool = True,
    ) -> None:
        if split_batches and batch_size % num_processes != 0:
            raise ValueError(
                f"split_batches needs a batch size that is a round multiple of the number "
                f"of processes; got batch_size={batch_size}, num_processes={num_processes}. "
                f"Use a batch size of {math.ceil(batch_size / num_processes) * num_processes} "
                "or split_batches=False."
            )
        if not 0 <= process_index < num_processes:
            raise ValueError(
                f"process_index must lie in [0, num_processes); got process_index="
                f"{process_index}, num_processes={num_processes}. Pass the rank and world size."
            )
        self.dataset = dataset
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.num_processes = num_processes
        self.process_index = process_index
        self.split_batches = split_batches
        self.even_batches = even_batches
        self.epoch = 0
        self.remainder = -1
        self.last_step_size = -1

    @property
    def total_batch_size(self) -> int:
        """Samples in one step over all processes."""
        return self.batch_size if self.split_batches else self.batch_size * self.num_processes

    @property
    def process_batch_size(self) -> int:
        """Samples of one process in one step."""
        return self.batch_size // self.num_processes if self.split_batches else self.batch_size

    def set_epoch(self, epoch: int) -> None:
        """Record the epoch and pass it on to the dataset when it has ``set_epoch``."""
        self.epoch = epoch
        if hasattr(self.dataset, "set_epoch"):
            self.dataset.set_epoch(epoch)

    def __len__(self) -> int:
        length = len(self.dataset)
        steps = length // self.total_batch_size
        if not self.drop_last and length % self.total_batch_size:
            if self.even_batches:
                steps += 1
            else:
                extra = length % self.total_batch_size
                mine = extra - self.process_index * self.process_batch_size
                return steps * self.process_batch_size + max(0, min(mine, self.process_batch_size))
        return steps * self.process_batch_size

    def __iter__(self) -> Iterator[Any]:
        self.remainder = -1
        self.last_step_size = -1
        generator = getattr(self.dataset, "generator", None)
        if not hasattr(self.dataset, "set_epoch") and isinstance(generator, torch.Generator):
            # Every process must read the same stream: a dataset that draws from its own
            # generator is reseeded with the epoch, alike everywhere.
            generator.manual_seed(self.epoch)
        total = self.total_batch_size
        start = self.process_index * self.process_batch_size
        stop = start + self.process_batch_size
        first: list[Any] | None = None
        step: list[Any] = []
        for sample in self.dataset:
            step.append(sample)
            if len(step) == total:
                self.remainder = self.last_step_size = total
                yield from step[start:stop]
                if first is None:
                    first = step
                step = []
        if not step or self.drop_last:
            return
        real = len(step)
        if self.even_batches:
            source = first if first is not None else step
            step = step + list(itertools.islice(itertools.cycle(source), total - real))
            self.remainder, self.last_step_size = real, total
        else:
            self.remainder = self.last_step_size = real
        yield from step[start:stop]

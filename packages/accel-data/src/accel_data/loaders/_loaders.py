"""``DataLoaderShard`` and the position bookkeeping shared by every prepared loader.

A prepared loader looks one batch ahead so that it knows, while yielding a batch, whether it is
the last one; it then sets ``end_of_dataloader`` and ``remainder`` (real samples in the last
step over all processes), which ``GradientState`` passes on to ``gather_for_metrics``.

Its position (epoch, batches yielded in the epoch, the sampler's seed or generator state at the
start of the epoch) is part of its state: ``state_dict`` / ``load_state_dict`` let a new loader
continue mid-epoch with exactly the order of an uninterrupted run.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch
from accel_collectives import send_to_device
from accel_state import GradientState, RNGType, synchronize_rng_states
from torch.utils.data import BatchSampler, DataLoader

from ..sharding._iterable import IterableDatasetShard
from ..sharding._samplers import BatchSamplerShard, SeedableRandomSampler, set_sampler_epoch
from ._position_check import check_position_state
from ._state_mixin import DataLoaderStateMixin
from ._stateful import BaseLoaderView, loader_class

_STATE_VERSION = 1


@dataclass
class _Position:
    """Where a loader stands; shared between a loader and the loaders ``skip_first_batches``
    derives from it, so that either one moves the epoch on."""

    epoch: int = 0
    batches_yielded: int = 0
    pending_skip: int = 0
    generator_state: torch.Tensor | None = None
    restore_generator: bool = False
    resumed: bool = False
    worker_state: dict[str, Any] | None = None
    """Stateful loaders: the ``StatefulDataLoader`` state after the batches yielded so far."""
    resumed_count: int = 0
    """Stateful loaders: batches yielded before the loaded state, until the next pass starts."""


def _set_loader_attribute(loader: DataLoader, name: str, value: Any) -> None:
    # DataLoader freezes ``batch_size`` / ``drop_last`` once built; prepared loaders report the
    # values of the loader they replace, which DataLoader itself never reads back when a batch
    # sampler is given.
    object.__setattr__(loader, name, value)


def check_skip_count(num_batches: int) -> int:
    """``num_batches`` if it is an int >= 0, else a ``ValueError`` that says so."""
    if isinstance(num_batches, bool) or not isinstance(num_batches, int) or num_batches < 0:
        raise ValueError(
            f"the number of batches to skip must be an int >= 0; got {num_batches!r}. "
            "Pass e.g. num_batches=2."
        )
    return num_batches


def _refuse_device_mesh(cls_name: str, torch_device_mesh: Any) -> None:
    if torch_device_mesh is not None:
        raise ValueError(
            f"{cls_name} takes no torch_device_mesh: the processes that share a batch are "
            f"chosen when the loader is prepared; got {torch_device_mesh!r}. Pass the mesh to "
            "prepare_data_loader(..., torch_device_mesh=mesh) instead."
        )


class _PreparedLoaderMixin(DataLoaderStateMixin):
    """Bookkeeping shared by ``DataLoaderShard`` and ``DataLoaderDispatcher``.

    Besides the public ``remainder`` (see ``DataLoaderStateMixin``), a prepared loader records
    at its last batch the exact number of real samples of the last step (``_real_remainder``)
    and the size of that step once completed (``_last_step_size``), which
    ``gather_for_metrics`` uses to drop exactly the repeated samples.
    """

    device: torch.device | None
    _drop_last: bool
    _non_blocking: bool
    _position: _Position
    _first_iter_skip: int | None
    _real_remainder: int
    _last_step_size: int
    use_stateful_dataloader: bool
    # Skipped batches of a sharded map-style loader are dropped as indices (never loaded).
    _skip_by_index = True
    _stateful_mixin = "loader"
    _position_format = False
    """A stateful loader's ``state_dict`` is its position with torchdata's state inside (set by
    ``prepare_data_loader``), rather than torchdata's state alone (a loader built directly)."""
    base_dataloader = BaseLoaderView()
    """The loader that loads the batches: this one (the reference's adapters wrap one)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        # use_stateful_dataloader=True builds the subclass that is also torchdata's
        # StatefulDataLoader; __init__ then runs with the same arguments.
        return super().__new__(loader_class(cls, args, kwargs))

    def _init_position(self, iteration: int = 0) -> None:
        self.end_of_dataloader = False
        self.remainder = -1
        self._real_remainder = -1
        self._last_step_size = -1
        self._position = _Position(epoch=int(iteration))
        self._first_iter_skip = None

    def _capture_state(self) -> None:
        """Record the iterator's state before the next batch is fetched (stateful loaders)."""

    # ----------------------------------------------------------------- GradientState hooks
    def _remainder_length(self) -> int:
        return int(self.total_dataset_length)  # type: ignore[attr-defined]

    def reset(self) -> None:
        """Clear ``end_of_dataloader``, ``remainder`` and the last step's sample counts."""
        super().reset()
        self._real_remainder = -1
        self._last_step_size = -1

    # ------------------------------------------------------------------------ position
    @property
    def iteration(self) -> int:
        """The epoch the next (or current) pass iterates; assigning it selects the epoch."""
        return self._position.epoch

    @iteration.setter
    def iteration(self, epoch: int) -> None:
        self._position.epoch = int(epoch)

    @property
    def skip_batches(self) -> int:
        """Batches the next pass skips (from ``skip_batches=``, ``skip_first_batches`` or
        ``load_state_dict``; for a stateful loader, the batches its loaded worker state has
        yielded); the passes after it are whole."""
        pending = self._first_iter_skip
        position = self._position
        return position.pending_skip + position.resumed_count if pending is None else pending

    @skip_batches.setter
    def skip_batches(self, count: int) -> None:
        self._first_iter_skip = check_skip_count(count)

    def _skip_clone(self, num_batches: int) -> Any:
        clone = copy.copy(self)
        object.__setattr__(clone, "_iterator", None)
        clone.skip_batches = num_batches
        return clone

    def get_sampler(self) -> Any:
        """The sampler that orders the samples (inside the batch sampler), or None."""
        return self._order_sampler()

    def set_sampler(self, sampler: Any) -> None:
        """Replace the sampler inside the batch sampler (and the one it wraps, if any)."""
        holder = getattr(self, "batch_sampler", None)
        if holder is None and isinstance(getattr(self, "sampler", None), BatchSampler):
            holder = self.sampler  # type: ignore[attr-defined]
        if holder is None:
            raise ValueError(
                "set_sampler replaces the sampler inside the loader's batch sampler; this "
                f"loader ({type(self).__name__}) has none (batch_size=None or an iterable "
                "dataset). Build the DataLoader with the sampler instead."
            )
        holder.sampler = sampler
        inner = getattr(holder, "batch_sampler", None)
        if inner is not None and hasattr(inner, "sampler"):
            inner.sampler = sampler

    def set_epoch(self, epoch: int) -> None:
        """Select the epoch of the next pass and pass it on to the sampler and the dataset."""
        self._position.epoch = int(epoch)
        self._forward_epoch(int(epoch))

    def _forward_epoch(self, epoch: int) -> None:
        sampler = getattr(self, "batch_sampler", None)
        if sampler is None:
            sampler = getattr(self, "sampler", None)
        set_sampler_epoch(sampler, epoch)
        dataset = getattr(self, "dataset", None)
        if dataset is not None and hasattr(dataset, "set_epoch"):
            dataset.set_epoch(epoch)

    def _order_sampler(self) -> Any:
        batch_sampler = getattr(self, "batch_sampler", None)
        sampler = getattr(batch_sampler, "sampler", None)
        if sampler is None:
            sampler = getattr(self, "sampler", None)
        return sampler

    def _order_generator(self) -> torch.Generator | None:
        sampler = self._order_sampler()
        if isinstance(sampler, SeedableRandomSampler):
            return None
        generator = getattr(sampler, "generator", None)
        return generator if isinstance(generator, torch.Generator) else None

    def _start_pass(self) -> int:
        """Set the epoch and generator for a new pass; return the batches to skip."""
        position = self._position
        self._forward_epoch(position.epoch)
        generator = self._order_generator()
        if generator is not None:
            if position.restore_generator and position.generator_state is not None:
                generator.set_state(position.generator_state)
            else:
                position.generator_state = generator.get_state()
        position.restore_generator = False
        if self._first_iter_skip is not None:
            skip, self._first_iter_skip = self._first_iter_skip, None
        else:
            skip = position.pending_skip
        position.pending_skip = 0
        position.batches_yielded = skip
        return skip

    def _finish_pass(self, advance: bool = True) -> None:
        position = self._position
        position.epoch += int(advance)
        position.batches_yielded = 0
        position.generator_state = None

    def state_dict(self) -> dict[str, Any]:
        """The loader's position: epoch, batches yielded in it, seed or generator state."""
        sampler = self._order_sampler()
        position = self._position
        state = position.generator_state
        if state is None:
            # Between passes: the next pass starts from the generator's current state.
            generator = self._order_generator()
            state = None if generator is None else generator.get_state()
        return {
            "version": _STATE_VERSION,
            "epoch": position.epoch,
            # Loaded and not iterated yet: the loaded position still stands.
            "batches_yielded": position.batches_yielded + position.pending_skip,
            "sampler_seed": getattr(sampler, "initial_seed", None)
            if isinstance(sampler, SeedableRandomSampler)
            else None,
            "generator_state": None if state is None else state.clone(),
            "total_batch_size": self.total_batch_size,  # type: ignore[attr-defined]
        }

    def check_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Refuse, changing nothing, a position ``state_dict`` could not have written for this
        loader (types, ranges, a position past the end of the epoch).

        Raises:
            TypeError, KeyError, ValueError: naming the key, the rule and the value.
        """
        try:
            # A whole epoch: the length counts only what the next pass yields after a skip.
            num_batches: int | None = len(self) + self.skip_batches  # type: ignore[arg-type]
        except TypeError:
            num_batches = None  # an iterable dataset has no length
        stateful = bool(getattr(self, "use_stateful_dataloader", False))
        check_position_state(state_dict, num_batches, stateful, _STATE_VERSION)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Continue from a position saved by ``state_dict``.

        The next pass iterates the saved epoch, with the saved seed or generator state, and
        starts after the batches that were already yielded; the passes after it run normally.
        """
        self.check_state_dict(state_dict)
        saved_total = state_dict.get("total_batch_size")
        total = self.total_batch_size  # type: ignore[attr-defined]
        if saved_total is not None and total is not None and saved_total != total:
            raise ValueError(
                "a loader can resume mid-epoch only with the same total batch size; saved "
                f"{saved_total}, this loader has {total}. Resume with the same number of "
                "processes and batch size, or start the epoch again."
            )
        position = self._position
        position.epoch = int(state_dict["epoch"])
        position.pending_skip = int(state_dict["batches_yielded"])
        position.batches_yielded = 0
        seed = state_dict.get("sampler_seed")
        sampler = self._order_sampler()
        if seed is not None and isinstance(sampler, SeedableRandomSampler):
            sampler.initial_seed = int(seed)
        generator_state = state_dict.get("generator_state")
        position.generator_state = None if generator_state is None else generator_state.clone()
        position.restore_generator = generator_state is not None
        position.resumed = True
        self._first_iter_skip = None

    # ------------------------------------------------------------------------ batches
    def _place(self, batch: Any) -> Any:
        if self.device is None:
            return batch
        return send_to_device(batch, self.device, non_blocking=self._non_blocking)

    def _with_lookahead(self, batches: Iterator[Any], source: Any) -> Iterator[Any]:
        """Yield ``batches`` placed on the device, flagging the last one before yielding it."""
        position = self._position
        try:
            current = next(batches)
        except StopIteration:
            # Nothing left: the epoch moves on only if batches were skipped (resumed at its end).
            self._finish_pass(advance=position.batches_yielded > 0)
            return
        while True:
            self._capture_state()
            try:
                following = next(batches)
            except StopIteration:
                self.end_of_dataloader = True
                self._read_remainder(source)
                position.batches_yielded += 1
                yield self._place(current)
                break
            position.batches_yielded += 1
            yield self._place(current)
            current = following
        self._finish_pass()

    def _read_remainder(self, source: Any) -> None:
        if source is None:
            self._real_remainder, self._last_step_size = -1, -1
        else:
            self._real_remainder = int(getattr(source, "remainder", -1))
            self._last_step_size = int(getattr(source, "last_step_size", -1))


class DataLoaderShard(_PreparedLoaderMixin, DataLoader):
    """A DataLoader that yields one process's batches and knows where it stands.

    Built by ``prepare_data_loader``; it keeps every setting of the DataLoader it replaces.
    Each pass calls ``set_epoch(iteration)`` first, which reaches the batch sampler, the
    sampler and the dataset when they have ``set_epoch``; a pass that runs to its end moves
    ``iteration`` to the next epoch.

    Args:
        dataset: The dataset (an ``IterableDatasetShard`` for sharded iterable datasets).
        device: Device the batches are moved to (None leaves them where they are).
        rng_types: Generators synchronised from the main process at the start of each pass.
        synchronized_generator: The generator of ``"generator"`` in ``rng_types``.
        skip_batches: Batches skipped at the start of the first pass only.
        use_stateful_dataloader: Build the loader on torchdata's ``StatefulDataLoader``
            (``pip install "accel-data[stateful]"``): it is then an instance of it, and its
            ``state_dict()`` is torchdata's state after the batches yielded (built by
            ``prepare_data_loader``: the position with that state under ``dataloader_state``).
        _drop_last: ``drop_last`` of the original DataLoader, reported as ``drop_last``.
        _non_blocking: Move batches with ``non_blocking=True``.
        torch_device_mesh: Must be None: pass a mesh to ``prepare_data_loader``, which decides
            from it which processes share a batch.
        iteration: The epoch of the first pass.
        **kwargs: DataLoader arguments (``batch_sampler``, ``num_workers``, ``collate_fn`` ...).

    Attributes:
        gradient_state: The ``GradientState`` the loader registers with while it iterates.
        total_batch_size: Samples in one step over all processes.
        total_dataset_length: Length of the dataset.
    """

    def __init__(
        self,
        dataset: Any,
        device: torch.device | str | None = None,
        rng_types: list[str | RNGType] | None = None,
        synchronized_generator: torch.Generator | None = None,
        skip_batches: int = 0,
        use_stateful_dataloader: bool = False,
        _drop_last: bool = False,
        _non_blocking: bool = False,
        torch_device_mesh: Any = None,
        iteration: int = 0,
        **kwargs: Any,
    ) -> None:
        _refuse_device_mesh("DataLoaderShard", torch_device_mesh)
        self._init_kwargs = dict(kwargs)
        super().__init__(dataset, **kwargs)
        self.device = torch.device(device) if device is not None else None
        self.rng_types = rng_types
        self.synchronized_generator = synchronized_generator
        self.use_stateful_dataloader = use_stateful_dataloader
        self._non_blocking = _non_blocking
        self._drop_last = _drop_last
        self._init_position(iteration)
        self.gradient_state = GradientState()
        if skip_batches:
            self.skip_batches = skip_batches
        if isinstance(self.batch_sampler, BatchSamplerShard):
            _set_loader_attribute(self, "batch_size", self.batch_sampler.batch_size)
            if self.batch_sampler.split_batches and self.batch_sampler.batch_size is not None:
                _set_loader_attribute(
                    self,
                    "batch_size",
                    self.batch_sampler.batch_size // self.batch_sampler.num_processes,
                )
        _set_loader_attribute(self, "drop_last", _drop_last)

    # ------------------------------------------------------------------------ sizes
    @property
    def _shard(self) -> BatchSamplerShard | IterableDatasetShard | None:
        if isinstance(self.batch_sampler, BatchSamplerShard):
            return self.batch_sampler
        if isinstance(self.dataset, IterableDatasetShard):
            return self.dataset
        return None

    @property
    def total_batch_size(self) -> int | None:
        """Samples in one step over all processes."""
        shard = self._shard
        if shard is not None:
            return shard.total_batch_size
        return self.batch_size

    @property
    def total_dataset_length(self) -> int:
        """Length of the dataset (its ``total_length`` when it has one)."""
        dataset = self.dataset
        if hasattr(dataset, "total_length"):
            return int(dataset.total_length)
        if isinstance(dataset, IterableDatasetShard):
            dataset = dataset.dataset
        return len(dataset)  # type: ignore[arg-type]

    # ------------------------------------------------------------------------ iteration
    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        if self.rng_types:
            synchronize_rng_states(self.rng_types, self.synchronized_generator)
        resumed, self._position.resumed = self._position.resumed, False
        skip = self._start_pass()
        self.begin()
        try:
            shard = self._shard
            by_index = self._skip_by_index and isinstance(shard, BatchSamplerShard)
            if by_index:
                # Skipped batches are dropped as indices: their samples are never loaded.
                shard._skip_next = skip  # type: ignore[union-attr]
            # Creating the iterator draws its base seed from torch's global generator. A pass
            # resumed from a state dict was created (and drew) before the state was saved, so
            # drawing again would shift every later random number of the run.
            rng = torch.get_rng_state() if resumed else None
            batches: Iterator[Any] = super().__iter__()
            if rng is not None:
                torch.set_rng_state(rng)
            if not by_index:
                batches = _skip_iter(batches, skip)
            yield from self._with_lookahead(batches, shard)
        finally:
            self.end()

    def __len__(self) -> int:
        return max(0, super().__len__() - self.skip_batches)


def _skip_iter(batches: Iterator[Any], skip: int) -> Iterator[Any]:
    for _ in range(skip):
        try:
            next(batches)
        except StopIteration:
            return iter(())
    return batches

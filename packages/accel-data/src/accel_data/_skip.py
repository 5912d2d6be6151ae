"""Skipping the first batches of one pass: ``skip_first_batches``, ``SkipBatchSampler`` and
``SkipDataLoader``.

A skip applies to the next pass only: the pass after it starts from the first batch again.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator
from typing import Any

from accel_state import GradientState
from torch.utils.data import BatchSampler, DataLoader, IterableDataset

from ._prepare_loader import loader_settings
from .loaders._dispatcher_loader import DataLoaderDispatcher
from .loaders._loaders import DataLoaderShard, _set_loader_attribute, check_skip_count
from .loaders._state_mixin import DataLoaderStateMixin
from .loaders._stateful import BaseLoaderView, loader_class
from .sharding._samplers import batch_sampler_length


class SkipBatchSampler(BatchSampler):
    """A batch sampler that leaves out the first ``skip_batches`` batches of its next pass.

    The indices of the skipped batches are dropped, so their samples are never loaded. Later
    passes yield every batch.

    Args:
        batch_sampler: The batch sampler to wrap.
        skip_batches: Batches left out of the next pass.
    """

    def __init__(self, batch_sampler: Iterable[list[int]], skip_batches: int = 0) -> None:
        self.batch_sampler = batch_sampler
        self.skip_batches = check_skip_count(skip_batches)
        self.sampler = getattr(batch_sampler, "sampler", None)  # type: ignore[assignment]
        self.batch_size = getattr(batch_sampler, "batch_size", None)  # type: ignore[assignment]
        self.drop_last = bool(getattr(batch_sampler, "drop_last", False))

    def __iter__(self) -> Iterator[list[int]]:
        skip, self.skip_batches = self.skip_batches, 0
        yield from itertools.islice(iter(self.batch_sampler), skip, None)

    @property
    def total_length(self) -> int:
        """Batches of a full pass."""
        return batch_sampler_length(self.batch_sampler)

    def __len__(self) -> int:
        return max(0, self.total_length - self.skip_batches)


class SkipDataLoader(DataLoaderStateMixin, DataLoader):
    """A DataLoader that reads and discards the first ``skip_batches`` batches of its next pass.

    For data that can only be read in order (iterable datasets); later passes yield every
    batch. While it iterates it is the active loader of ``GradientState`` and flags its last
    batch with ``end_of_dataloader``.

    Args:
        dataset: The dataset.
        skip_batches: Batches discarded at the start of the next pass.
        use_stateful_dataloader: Build the loader on torchdata's ``StatefulDataLoader``
            (``pip install "accel-data[stateful]"``): it is then an instance of it, and its
            ``state_dict()`` is torchdata's state after the batches yielded so far (the skipped
            ones count), which ``load_state_dict`` continues from.
        **kwargs: DataLoader arguments.
    """

    _stateful_mixin = "skip"
    base_dataloader = BaseLoaderView()
    """The loader that loads the batches: this one (the reference's adapters wrap one)."""

    def __new__(
        cls,
        dataset: Any,
        skip_batches: int = 0,
        use_stateful_dataloader: bool = False,
        **kwargs: Any,
    ) -> Any:
        # use_stateful_dataloader=True builds the subclass that is also torchdata's
        # StatefulDataLoader; __init__ then runs with the same arguments. The parameters are
        # spelled out so that the class's signature is __init__'s.
        flag = {"use_stateful_dataloader": use_stateful_dataloader}
        return super().__new__(loader_class(cls, (), flag))

    def __init__(
        self,
        dataset: Any,
        skip_batches: int = 0,
        use_stateful_dataloader: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(dataset, **kwargs)
        self.skip_batches = check_skip_count(skip_batches)
        self.use_stateful_dataloader = bool(use_stateful_dataloader)
        self.gradient_state = GradientState()

    def _capture_state(self) -> None:
        """Record the iterator's state before the next batch is fetched (stateful loader)."""

    def _finish_pass(self) -> None:
        """Forget the state recorded during the pass (stateful loader)."""

    def __iter__(self) -> Iterator[Any]:  # type: ignore[override]
        skip, self.skip_batches = self.skip_batches, 0
        self.begin()
        try:
            batches = itertools.islice(super().__iter__(), skip, None)
            current = next(batches, _DONE)
            while current is not _DONE:
                self._capture_state()
                following = next(batches, _DONE)
                if following is _DONE:
                    self.end_of_dataloader = True
                yield current
                current = following
            self._finish_pass()
        finally:
            self.end()

    def __len__(self) -> int:
        return max(0, super().__len__() - self.skip_batches)


_DONE = object()


def skip_first_batches(dataloader: DataLoader, num_batches: int = 0) -> DataLoader:
    """A loader like ``dataloader`` whose next pass starts after ``num_batches`` batches.

    Every setting carries over (``drop_last``, ``batch_size``, ``collate_fn``, workers,
    ``pin_memory``, device placement, ``non_blocking``, the sampler and its epoch). The skip
    applies to the next pass only. For a prepared loader the new loader shares the position of
    the original: when its pass ends, the original continues with the following epoch, and
    ``num_batches`` counts from the start of the epoch (it replaces, not adds to, a position
    restored with ``load_state_dict``). A loader whose class defines a
    ``skip_first_batches(num_batches)`` method (a wrapper that yields something else than the
    batches of the loader it wraps) skips through that method.

    Args:
        dataloader: A DataLoader, prepared or not.
        num_batches: Batches to skip.

    Returns:
        The new loader.
    """
    num_batches = check_skip_count(num_batches)
    own = getattr(type(dataloader), "skip_first_batches", None)
    if callable(own):  # a wrapper whose batches are not its loader's (a sequence-split loader)
        return own(dataloader, num_batches)
    if isinstance(dataloader, (DataLoaderShard, DataLoaderDispatcher)):
        return dataloader._skip_clone(num_batches)
    if not isinstance(dataloader, DataLoader):
        raise TypeError(
            f"skip_first_batches needs a torch.utils.data.DataLoader; got "
            f"{type(dataloader).__name__}. Pass the DataLoader you iterate."
        )
    settings = loader_settings(dataloader)
    if isinstance(dataloader.dataset, IterableDataset) or dataloader.batch_sampler is None:
        return SkipDataLoader(
            dataloader.dataset,
            skip_batches=num_batches,
            batch_size=dataloader.batch_size,
            drop_last=dataloader.drop_last,
            sampler=None if isinstance(dataloader.dataset, IterableDataset) else dataloader.sampler,
            **settings,
        )
    new = DataLoader(
        dataloader.dataset,
        batch_sampler=SkipBatchSampler(dataloader.batch_sampler, num_batches),
        **settings,
    )
    _set_loader_attribute(new, "batch_size", dataloader.batch_size)
    _set_loader_attribute(new, "drop_last", dataloader.drop_last)
    return new

"""Changing ``even_batches`` of prepared loaders for a block (uneven inputs under ``Join``)."""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Iterable, Iterator
from typing import Any

from torch.utils.data import IterableDataset


@contextlib.contextmanager
def override_even_batches(loaders: Iterable[Any], even_batches: bool | None) -> Iterator[None]:
    """Give the batch sampler of each loader ``even_batches`` inside the block, then put the
    previous values back (even when the block raises).

    Args:
        loaders: Loaders returned by [`prepare_data_loader`][accel_data.prepare_data_loader]; those without a sharded batch
            sampler (dispatched or iterable-dataset loaders) are left as they are, with a
            ``UserWarning`` naming the rule when one of them is iterable.
        even_batches: The value inside the block; ``None`` changes nothing.
    """
    from .loaders._dispatcher_loader import DataLoaderDispatcher

    saved = []
    if even_batches is not None:
        iterable = 0
        for loader in loaders:
            sampler = getattr(loader, "batch_sampler", None)
            if sampler is not None and hasattr(sampler, "even_batches"):
                saved.append((sampler, sampler.even_batches))
                sampler.even_batches = even_batches
            elif isinstance(loader, DataLoaderDispatcher) or isinstance(
                getattr(loader, "dataset", None), IterableDataset
            ):
                iterable += 1
        if iterable:
            warnings.warn(
                f"Overriding even_batches is only supported for map-style datasets, yet "
                f"{iterable} of the loaders given were iterable (dispatched, or of an "
                "IterableDataset): they keep their own batching inside this block. Give "
                "map-style loaders, or leave even_batches unset for those.",
                UserWarning,
                stacklevel=3,
            )
    try:
        yield
    finally:
        for sampler, value in saved:
            sampler.even_batches = value

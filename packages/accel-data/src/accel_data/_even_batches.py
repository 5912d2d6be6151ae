"""Changing ``even_batches`` of prepared loaders for a block (uneven inputs under ``Join``)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any


@contextlib.contextmanager
def override_even_batches(loaders: Iterable[Any], even_batches: bool | None) -> Iterator[None]:
    """Give the batch sampler of each loader ``even_batches`` inside the block, then put the
    previous values back (even when the block raises).

    Args:
        loaders: Loaders returned by :func:`prepare_data_loader`; those without a sharded batch
            sampler (dispatched or iterable-dataset loaders) are left as they are.
        even_batches: The value inside the block; ``None`` changes nothing.
    """
    saved = []
    if even_batches is not None:
        for loader in loaders:
            sampler = getattr(loader, "batch_sampler", None)
            if sampler is not None and hasattr(sampler, "even_batches"):
                saved.append((sampler, sampler.even_batches))
                sampler.even_batches = even_batches
    try:
        yield
    finally:
        for sampler, value in saved:
            sampler.even_batches = value

"""``MpDeviceLoaderWrapper``: a prepared loader fed to XLA devices by torch_xla's background
loader (``MpDeviceLoader``), which also cuts the lazy graph at each batch."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from accel_state import synchronize_rng_states, torch_xla_module


class MpDeviceLoaderWrapper:
    """Wraps a prepared loader (``DataLoaderShard``) for one XLA device.

    Iterating starts torch_xla's ``MpDeviceLoader`` over the loader: batches are moved to
    ``device`` ahead of use and each batch marks a step of the lazy graph. The random states
    of the loader's ``rng_types`` are synchronised here, once per pass, as the wrapped loader
    would do.

    Args:
        dataloader: A prepared loader (its batches stay on the CPU; this wrapper moves them).
        device: The XLA device of this replica.

    Raises:
        RuntimeError: where torch_xla is not usable (the message says how to get it).
    """

    def __init__(self, dataloader: Any, device: torch.device) -> None:
        self._parallel_loader = torch_xla_module("distributed.parallel_loader")
        self._loader = dataloader
        self._rng_types = getattr(dataloader, "rng_types", None)
        if self._rng_types is not None:
            # Synchronised here: the background thread must not draw first.
            dataloader.rng_types = None
        self.device = device

    def __iter__(self) -> Iterator[Any]:
        if self._rng_types:
            synchronize_rng_states(
                self._rng_types, getattr(self._loader, "synchronized_generator", None)
            )
        loader = self._parallel_loader.MpDeviceLoader(self._loader, self.device)
        return iter(loader)

    def __len__(self) -> int:
        return len(self._loader)

    def set_epoch(self, epoch: int) -> None:
        """Set the epoch of the wrapped loader (its shuffling seed)."""
        if hasattr(self._loader, "set_epoch"):
            self._loader.set_epoch(epoch)

    @property
    def dataloader(self) -> Any:
        """The wrapped prepared loader."""
        return self._loader

    @property
    def total_batch_size(self) -> Any:
        """Samples in one step over all replicas."""
        return self._loader.total_batch_size

    @property
    def total_dataset_length(self) -> Any:
        """Length of the dataset."""
        return self._loader.total_dataset_length

    @property
    def batch_sampler(self) -> Any:
        """The batch sampler of the wrapped loader."""
        return self._loader.batch_sampler

    def __getattr__(self, name: str) -> Any:
        # Everything else (state_dict, end_of_dataloader ...) is the wrapped loader's.
        if name.startswith("__") or name in {"_loader", "_parallel_loader", "_rng_types"}:
            raise AttributeError(name)
        return getattr(self._loader, name)

    def __repr__(self) -> str:
        return f"MpDeviceLoaderWrapper({self._loader!r}, device={self.device})"


__all__ = ["MpDeviceLoaderWrapper"]

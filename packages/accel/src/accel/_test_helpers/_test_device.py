"""Which device the tests of this machine run on: ``torch_device``, ``device_count`` and
``memory_allocated_func``, computed once at import (as test modules read them at collection)."""

from __future__ import annotations

from collections.abc import Callable

import torch
from accel_state import (
    get_current_device_type,
    is_cuda_available,
    is_mps_available,
    is_torch_xla_available,
)


def _no_memory_counter() -> int:
    """Bytes allocated on a device that does not count them (the CPU): always 0."""
    return 0


def get_backend() -> tuple[str, int, Callable[[], int]]:
    """The device family tests run on, how many of its devices this machine has, and the
    function that reads the bytes allocated on it.

    Returns:
        ``(device type, device count, memory counter)``: ``("cuda", 8, torch.cuda.memory_allocated)``
        on an 8-GPU machine (also under torch_xla on GPUs, where the type is ``"xla"``),
        ``("mps", 1, ...)`` on Apple silicon, ``("cpu", 1, <returns 0>)`` with no accelerator.
    """
    if is_torch_xla_available():
        return "xla", torch.cuda.device_count(), torch.cuda.memory_allocated
    if is_cuda_available():
        return "cuda", torch.cuda.device_count(), torch.cuda.memory_allocated
    if is_mps_available():
        counter = getattr(torch.mps, "current_allocated_memory", _no_memory_counter)
        return "mps", 1, counter
    device_type, _ = get_current_device_type()
    module = getattr(torch, device_type, None)
    if device_type == "cpu" or module is None:
        return "cpu", 1, _no_memory_counter
    return device_type, int(module.device_count()), module.memory_allocated


torch_device, device_count, memory_allocated_func = get_backend()

__all__ = ["device_count", "get_backend", "memory_allocated_func", "torch_device"]

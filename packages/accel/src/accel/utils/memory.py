"""``accel.utils.memory``: the names of the reference's ``accelerate.utils.memory``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.memory"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_state import (
        clear_device_cache,
        find_executable_batch_size,
        is_cuda_available,
        is_hpu_available,
        is_mlu_available,
        is_mps_available,
        is_musa_available,
        is_neuron_available,
        is_npu_available,
        is_sdaa_available,
        is_xpu_available,
        release_memory,
        should_reduce_batch_size,
    )

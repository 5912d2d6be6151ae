"""``accel.launchers``: the names of the reference's ``accelerate.launchers``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.launchers"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_launch import (
        notebook_launcher,
    )
    from accel_state import (
        AcceleratorState,
        PartialState,
        PrecisionType,
        are_libraries_initialized,
        check_cuda_p2p_ib_support,
        debug_launcher,
        get_current_device_type,
        get_gpu_info,
        is_mps_available,
        is_rocm_available,
        is_torch_version,
        patch_environment,
    )

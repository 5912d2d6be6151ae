"""``accel.utils.environment``: the names of the reference's ``accelerate.utils.environment``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.environment"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_state import (
        CPUInformation,
        are_libraries_initialized,
        check_cuda_fp8_capability,
        check_cuda_p2p_ib_support,
        clear_environment,
        convert_dict_to_env_variables,
        get_cpu_distributed_information,
        get_current_device_type,
        get_driver_version,
        get_gpu_info,
        get_int_from_env,
        override_numa_affinity,
        parse_choice_from_env,
        parse_flag_from_env,
        patch_environment,
        purge_accelerate_environment,
        set_numa_affinity,
        str_to_bool,
    )

"""``accel.utils.launch``: the names of the reference's ``accelerate.utils.launch``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.launch"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_launch import SageMakerConfig, prepare_multi_gpu_env, prepare_sagemager_args_inputs
    from accel_state import (
        DistributedType,
        DynamoBackend,
        PrecisionType,
        SageMakerDistributedType,
        compare_versions,
        get_free_port,
        is_fp8_available,
        is_hpu_available,
        is_mlu_available,
        is_musa_available,
        is_neuron_available,
        is_npu_available,
        is_port_in_use,
        is_sdaa_available,
        is_torch_xla_available,
        is_xpu_available,
        merge_dicts,
        str_to_bool,
    )

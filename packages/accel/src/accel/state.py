"""``accel.state``: the names of the reference's ``accelerate.state``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.state"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_state import (
        AcceleratorState,
        DistributedType,
        DynamoBackend,
        GradientAccumulationPlugin,
        GradientState,
        PartialState,
        SageMakerDistributedType,
        ThreadLocalSharedDict,
        check_cuda_fp8_capability,
        check_cuda_p2p_ib_support,
        deepspeed_required,
        do_nothing,
        get_cpu_distributed_information,
        get_int_from_env,
        is_datasets_available,
        is_deepspeed_available,
        is_fp8_available,
        is_habana_gaudi1,
        is_hpu_available,
        is_initialized,
        is_mlu_available,
        is_mps_available,
        is_musa_available,
        is_neuron_available,
        is_npu_available,
        is_sdaa_available,
        is_torch_xla_available,
        is_xccl_available,
        is_xpu_available,
        parse_choice_from_env,
        parse_flag_from_env,
        set_numa_affinity,
    )

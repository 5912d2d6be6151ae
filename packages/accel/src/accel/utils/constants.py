"""``accel.utils.constants``: the names of the reference's ``accelerate.utils.constants``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.constants"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        SAFE_MODEL_NAME,
        SAFE_WEIGHTS_PATTERN_NAME,
        SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING,
        WEIGHTS_PATTERN_NAME,
    )
    from accel_launch import (
        SAGEMAKER_PARALLEL_EC2_INSTANCES,
        SAGEMAKER_PYTHON_VERSION,
        SAGEMAKER_PYTORCH_VERSION,
        SAGEMAKER_TRANSFORMERS_VERSION,
    )
    from accel_state import (
        BETA_CP_AVAILABLE_PYTORCH_VERSION,
        BETA_SP_AVAILABLE_DEEPSPEED_VERSION,
        BETA_TP_AVAILABLE_PYTORCH_VERSION,
        BETA_TP_AVAILABLE_TRANSFORMERS_VERSION,
        CUDA_DISTRIBUTED_TYPES,
        FSDP2_PYTORCH_VERSION,
        FSDP2_STATE_DICT_TYPE,
        FSDP_AUTO_WRAP_POLICY,
        FSDP_BACKWARD_PREFETCH,
        FSDP_MODEL_NAME,
        FSDP_PYTORCH_VERSION,
        FSDP_SHARDING_STRATEGY,
        FSDP_STATE_DICT_TYPE,
        PROFILE_PATTERN_NAME,
        STR_OPERATION_TO_FUNC,
        TORCH_DISTRIBUTED_OPERATION_TYPES,
        TORCH_DYNAMO_MODES,
    )

    from accel._checkpoint._functional import SAMPLER_NAME
    from accel._checkpoint._state_files import (
        MODEL_NAME,
        OPTIMIZER_NAME,
        RNG_STATE_NAME,
        SAFE_WEIGHTS_INDEX_NAME,
        SAFE_WEIGHTS_NAME,
        SCALER_NAME,
        SCHEDULER_NAME,
        WEIGHTS_INDEX_NAME,
        WEIGHTS_NAME,
    )

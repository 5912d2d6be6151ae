"""Process state for accel: who this process is, how many there are, which device, which group.

Importing this package imports torch and nothing heavier.
"""

from importlib import import_module as _import_module
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

# Public name -> private module. Loaded on first use so that `import accel_state` (and the
# `accel` command) does not pay for torch until a name that needs it is used.
_EXPORTS = {
    "clear_device_cache": "._memory",
    "find_executable_batch_size": "._memory",
    "release_memory": "._memory",
    "should_reduce_batch_size": "._memory",
    "AcceleratorState": "._accelerator_state",
    "AutocastKwargs": "._kwargs",
    "ComputeEnvironment": "._enums",
    "DeepSpeedPlugin": "._deepspeed_plugin",
    "DistributedDataParallelKwargs": "._kwargs",
    "DistributedType": "._enums",
    "DynamoBackend": "._enums",
    "FullyShardedDataParallelPlugin": "._fsdp_plugin",
    "GradScalerKwargs": "._kwargs",
    "GradientAccumulationPlugin": "._plugins",
    "GradientState": "._accelerator_state",
    "HfDeepSpeedConfig": "._deepspeed_plugin",
    "InitProcessGroupKwargs": "._kwargs",
    "KwargsHandler": "._kwargs",
    "ParallelismConfig": "._parallelism",
    "PartialState": "._state",
    "PrecisionType": "._enums",
    "ProfileKwargs": "._kwargs",
    "ProjectConfiguration": "._plugins",
    "RNGType": "._enums",
    "SageMakerDistributedType": "._enums",
    "TorchDynamoPlugin": "._plugins",
    "TorchTensorParallelPlugin": "._parallelism",
    "WorldInfo": "._environment",
    "clear_environment": "._environment",
    "compare_versions": "._imports",
    "detect_world": "._environment",
    "get_int_from_env": "._environment",
    "get_module_class_from_name": "._fsdp_plugin",
    "is_aim_available": "._imports",
    "is_bf16_available": "._imports",
    "is_bnb_available": "._imports",
    "is_clearml_available": "._imports",
    "is_comet_ml_available": "._imports",
    "is_cuda_available": "._imports",
    "is_datasets_available": "._imports",
    "is_debug_mode": "._state",
    "is_deepspeed_available": "._imports",
    "is_dvclive_available": "._imports",
    "is_fp16_available": "._imports",
    "is_fp8_available": "._imports",
    "is_megatron_lm_available": "._imports",
    "is_mlflow_available": "._imports",
    "is_mps_available": "._imports",
    "is_msamp_available": "._imports",
    "is_npu_available": "._imports",
    "is_pippy_available": "._imports",
    "is_rich_available": "._imports",
    "is_safetensors_available": "._imports",
    "is_tensorboard_available": "._imports",
    "is_torch_version": "._imports",
    "is_torch_xla_available": "._imports",
    "is_torchao_available": "._imports",
    "is_tpu_available": "._imports",
    "is_transformer_engine_available": "._imports",
    "is_transformers_available": "._imports",
    "is_wandb_available": "._imports",
    "is_xpu_available": "._imports",
    "parse_choice_from_env": "._environment",
    "parse_flag_from_env": "._environment",
    "patch_environment": "._environment",
    "set_seed": "._random",
    "str_to_bool": "._environment",
    "synchronize_rng_state": "._random",
    "synchronize_rng_states": "._random",
    "teardown_process_group": "._teardown",
    "unsupported_distributed_type": "._support",
}

__version__ = _version("accel-state")

__all__ = [
    "clear_device_cache",
    "find_executable_batch_size",
    "release_memory",
    "should_reduce_batch_size",
    "AcceleratorState",
    "AutocastKwargs",
    "ComputeEnvironment",
    "DeepSpeedPlugin",
    "DistributedDataParallelKwargs",
    "DistributedType",
    "DynamoBackend",
    "FullyShardedDataParallelPlugin",
    "GradScalerKwargs",
    "GradientAccumulationPlugin",
    "GradientState",
    "HfDeepSpeedConfig",
    "InitProcessGroupKwargs",
    "KwargsHandler",
    "ParallelismConfig",
    "PartialState",
    "PrecisionType",
    "ProfileKwargs",
    "ProjectConfiguration",
    "RNGType",
    "SageMakerDistributedType",
    "TorchDynamoPlugin",
    "TorchTensorParallelPlugin",
    "WorldInfo",
    "__version__",
    "clear_environment",
    "compare_versions",
    "detect_world",
    "get_int_from_env",
    "get_module_class_from_name",
    "is_aim_available",
    "is_bf16_available",
    "is_bnb_available",
    "is_clearml_available",
    "is_comet_ml_available",
    "is_cuda_available",
    "is_datasets_available",
    "is_debug_mode",
    "is_deepspeed_available",
    "is_dvclive_available",
    "is_fp16_available",
    "is_fp8_available",
    "is_megatron_lm_available",
    "is_mlflow_available",
    "is_mps_available",
    "is_msamp_available",
    "is_npu_available",
    "is_pippy_available",
    "is_rich_available",
    "is_safetensors_available",
    "is_tensorboard_available",
    "is_torch_version",
    "is_torch_xla_available",
    "is_torchao_available",
    "is_tpu_available",
    "is_transformer_engine_available",
    "is_transformers_available",
    "is_wandb_available",
    "is_xpu_available",
    "parse_choice_from_env",
    "parse_flag_from_env",
    "patch_environment",
    "set_seed",
    "str_to_bool",
    "synchronize_rng_state",
    "synchronize_rng_states",
    "teardown_process_group",
    "unsupported_distributed_type",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_state' has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from ._accelerator_state import AcceleratorState, GradientState
    from ._deepspeed_plugin import DeepSpeedPlugin, HfDeepSpeedConfig
    from ._enums import (
        ComputeEnvironment,
        DistributedType,
        DynamoBackend,
        PrecisionType,
        RNGType,
        SageMakerDistributedType,
    )
    from ._environment import (
        WorldInfo,
        clear_environment,
        detect_world,
        get_int_from_env,
        parse_choice_from_env,
        parse_flag_from_env,
        patch_environment,
        str_to_bool,
    )
    from ._fsdp_plugin import FullyShardedDataParallelPlugin, get_module_class_from_name
    from ._imports import (
        compare_versions,
        is_aim_available,
        is_bf16_available,
        is_bnb_available,
        is_clearml_available,
        is_comet_ml_available,
        is_cuda_available,
        is_datasets_available,
        is_deepspeed_available,
        is_dvclive_available,
        is_fp8_available,
        is_fp16_available,
        is_megatron_lm_available,
        is_mlflow_available,
        is_mps_available,
        is_msamp_available,
        is_npu_available,
        is_pippy_available,
        is_rich_available,
        is_safetensors_available,
        is_tensorboard_available,
        is_torch_version,
        is_torch_xla_available,
        is_torchao_available,
        is_tpu_available,
        is_transformer_engine_available,
        is_transformers_available,
        is_wandb_available,
        is_xpu_available,
    )
    from ._kwargs import (
        AutocastKwargs,
        DistributedDataParallelKwargs,
        GradScalerKwargs,
        InitProcessGroupKwargs,
        KwargsHandler,
        ProfileKwargs,
    )
    from ._memory import (
        clear_device_cache,
        find_executable_batch_size,
        release_memory,
        should_reduce_batch_size,
    )
    from ._parallelism import ParallelismConfig, TorchTensorParallelPlugin
    from ._plugins import GradientAccumulationPlugin, ProjectConfiguration, TorchDynamoPlugin
    from ._random import set_seed, synchronize_rng_state, synchronize_rng_states
    from ._state import PartialState, is_debug_mode
    from ._support import unsupported_distributed_type
    from ._teardown import teardown_process_group

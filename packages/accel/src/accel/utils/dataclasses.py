"""``accel.utils.dataclasses``: the names of the reference's ``accelerate.utils.dataclasses``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.dataclasses"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import CustomDtype
    from accel_collectives import (
        TensorInformation,
    )
    from accel_data import (
        DataLoaderConfiguration,
    )
    from accel_precision import (
        AORecipeKwargs,
        BnbQuantizationConfig,
        FP8BackendType,
        FP8RecipeKwargs,
        MSAMPRecipeKwargs,
        TERecipeKwargs,
    )
    from accel_state import (
        FSDP2_PYTORCH_VERSION,
        FSDP_AUTO_WRAP_POLICY,
        FSDP_BACKWARD_PREFETCH,
        FSDP_SHARDING_STRATEGY,
        MODEL_CONFIGS_TO_MEGATRON_PARSERS,
        AutocastKwargs,
        BaseEnum,
        ComputeEnvironment,
        DDPCommunicationHookType,
        DeepSpeedPlugin,
        DeepSpeedSequenceParallelConfig,
        DistributedDataParallelKwargs,
        DistributedType,
        DynamoBackend,
        EnumWithContains,
        FullyShardedDataParallelPlugin,
        GradientAccumulationPlugin,
        GradScalerKwargs,
        InitProcessGroupKwargs,
        KwargsHandler,
        MegatronLMPlugin,
        PrecisionType,
        ProfileKwargs,
        ProjectConfiguration,
        RNGType,
        SageMakerDistributedType,
        TorchContextParallelConfig,
        TorchDynamoPlugin,
        TorchTensorParallelConfig,
        TorchTensorParallelPlugin,
        add_model_config_to_megatron_parser,
        compare_versions,
        get_module_class_from_name,
        is_cuda_available,
        is_hpu_available,
        is_mlu_available,
        is_msamp_available,
        is_musa_available,
        is_neuron_available,
        is_npu_available,
        is_rocm_available,
        is_torch_version,
        is_torchao_available,
        is_transformer_engine_available,
        is_xpu_available,
        parse_bert_config,
        parse_flag_from_env,
        parse_glm4_moe_config,
        parse_gpt2_config,
        parse_llama_config,
        parse_t5_config,
        str_to_bool,
    )
    from accel_trackers import (
        LoggerType,
    )

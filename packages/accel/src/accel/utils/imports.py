"""``accel.utils.imports``: the names of the reference's ``accelerate.utils.imports``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.imports"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_state import (
        USE_TORCH_XLA,
        compare_versions,
        deepspeed_required,
        is_4bit_bnb_available,
        is_8bit_bnb_available,
        is_aim_available,
        is_amdsmi_available,
        is_bf16_available,
        is_bitsandbytes_multi_backend_available,
        is_bnb_available,
        is_boto3_available,
        is_clearml_available,
        is_comet_ml_available,
        is_cuda_available,
        is_datasets_available,
        is_deepspeed_available,
        is_dvclive_available,
        is_fp8_available,
        is_fp16_available,
        is_habana_gaudi1,
        is_hpu_available,
        is_import_timer_available,
        is_lomo_available,
        is_matplotlib_available,
        is_megatron_lm_available,
        is_mlflow_available,
        is_mlu_available,
        is_mps_available,
        is_msamp_available,
        is_musa_available,
        is_neuron_available,
        is_npu_available,
        is_numpy_available,
        is_pandas_available,
        is_peft_available,
        is_pippy_available,
        is_pynvml_available,
        is_pytest_available,
        is_rich_available,
        is_rocm_available,
        is_sagemaker_available,
        is_schedulefree_available,
        is_sdaa_available,
        is_swanlab_available,
        is_tensorboard_available,
        is_timm_available,
        is_torch_distributed_available,
        is_torch_version,
        is_torch_xla_available,
        is_torchao_available,
        is_torchdata_available,
        is_torchdata_stateful_dataloader_available,
        is_torchvision_available,
        is_tqdm_available,
        is_trackio_available,
        is_transformer_engine_available,
        is_transformer_engine_mxfp8_available,
        is_transformers_available,
        is_triton_available,
        is_wandb_available,
        is_weights_only_available,
        is_xccl_available,
        is_xpu_available,
        parse_flag_from_env,
        patch_environment,
        str_to_bool,
        torchao_required,
    )

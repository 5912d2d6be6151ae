"""Which names each of the reference's ``accelerate.test_utils`` paths shows under
``accel.test_utils``: the helpers test suites import (skip decorators, launch commands, the
regression model, offline dataloaders), from the facade's ``_test_helpers``."""

from __future__ import annotations

from ._owners import Owned

TEST_UTILS_PATHS: dict[str, Owned] = {
    "accel.test_utils": Owned(
        """DEFAULT_LAUNCH_COMMAND RegressionDataset RegressionModel SubprocessCallException
        are_the_same_tensors assert_exception capture_call_output device_count
        execute_subprocess_async get_backend get_launch_command get_torch_dist_unique_port
        memory_allocated_func path_in_accelerate_package pytest_xdist_worker_id require_bnb
        require_cpu require_cuda require_cuda_or_hpu require_cuda_or_xpu require_fp16
        require_fp8 require_huggingface_suite require_mlu require_mps require_multi_device
        require_multi_gpu require_multi_gpu_or_xpu require_multi_xpu require_musa
        require_non_cpu require_non_hpu require_non_torch_xla require_non_xpu require_npu
        require_pippy require_sdaa require_single_device require_single_gpu require_single_xpu
        require_torch_min_version require_torchao require_torchvision require_tpu
        require_transformer_engine require_transformer_engine_mxfp8 require_xpu run_command
        run_first skip slow torch_device"""
    ),
    "accel.test_utils.testing": Owned(
        """AccelerateTestCase AcceleratorState DEFAULT_LAUNCH_COMMAND GradientState MockingTestCase
        SubprocessCallException TempDirTestCase are_the_same_tensors assert_exception
        capture_call_output check_cuda_fp8_capability compare_versions device_count
        execute_subprocess_async gather get_backend get_launch_command
        get_torch_dist_unique_port is_aim_available is_bnb_available is_clearml_available
        is_comet_ml_available is_cuda_available is_datasets_available is_deepspeed_available
        is_dvclive_available is_fp16_available is_fp8_available is_habana_gaudi1
        is_hpu_available is_import_timer_available is_matplotlib_available is_mlflow_available
        is_mlu_available is_mps_available is_musa_available is_neuron_available is_npu_available
        is_pandas_available is_peft_available is_pippy_available is_pytest_available
        is_schedulefree_available is_sdaa_available is_swanlab_available
        is_tensorboard_available is_timm_available is_torch_version is_torch_xla_available
        is_torchao_available is_torchdata_stateful_dataloader_available is_torchvision_available
        is_trackio_available is_transformer_engine_available
        is_transformer_engine_mxfp8_available is_transformers_available is_triton_available
        is_wandb_available is_xpu_available memory_allocated_func parse_flag_from_env
        path_in_accelerate_package pytest_xdist_worker_id require_aim require_bnb
        require_clearml require_comet_ml require_cpu require_cuda require_cuda_or_hpu
        require_cuda_or_xpu require_datasets require_deepspeed require_dvclive require_fp16
        require_fp8 require_fsdp2 require_huggingface_suite require_import_timer
        require_matplotlib require_mlflow require_mlu require_mps require_multi_device
        require_multi_gpu require_multi_gpu_or_xpu require_multi_xpu require_musa require_neuron
        require_non_cpu require_non_hpu require_non_torch_xla require_non_xpu require_npu
        require_pandas require_peft require_pippy require_schedulefree require_sdaa
        require_single_device require_single_gpu require_single_xpu require_swanlab
        require_tensorboard require_timm require_torch_min_version require_torchao
        require_torchdata_stateful_dataloader require_torchvision require_tp require_tpu
        require_trackers require_trackio require_transformer_engine
        require_transformer_engine_mxfp8 require_transformers require_triton require_wandb
        require_xpu run_command run_first skip slow str_to_bool torch_device"""
    ),
    "accel.test_utils.training": Owned(
        """DistributedType RegressionDataset RegressionModel mocked_dataloaders
        mocked_dataloaders_for_autoregressive_models"""
    ),
    "accel.test_utils.examples": Owned(
        """clean_lines compare_against_test get_function_contents_by_name"""
    ),
}

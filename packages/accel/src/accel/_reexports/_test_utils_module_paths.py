"""Which module provides each name of the reference's ``accelerate.test_utils`` paths under
``accel.test_utils``: the helpers test suites import (skip decorators, launch commands, the
regression model, offline dataloaders), from the facade's ``_test_helpers``."""

from __future__ import annotations

from ._public_names import _names

_HELPERS = "accel._test_helpers"

_DEVICES = _names(
    f"{_HELPERS}._test_device", "device_count get_backend memory_allocated_func torch_device"
)
_MARKERS = _names(f"{_HELPERS}._markers", "require_torch_min_version run_first skip slow")
_REQUIRE_DEVICES = _names(
    f"{_HELPERS}._require_devices",
    """require_cpu require_cuda require_cuda_or_hpu require_cuda_or_xpu require_fp8
        require_fp16 require_fsdp2 require_mlu require_mps require_multi_device
        require_multi_gpu require_multi_gpu_or_xpu require_multi_xpu require_musa
        require_neuron require_non_cpu require_non_hpu require_non_torch_xla require_non_xpu
        require_npu require_pippy require_sdaa require_single_device require_single_gpu
        require_single_xpu require_tp require_tpu require_xpu""",
)
_REQUIRE_LIBRARIES = _names(
    f"{_HELPERS}._require_libraries",
    """require_aim require_bnb require_clearml require_comet_ml require_datasets
        require_deepspeed require_dvclive require_huggingface_suite require_import_timer
        require_matplotlib require_mlflow require_pandas require_peft require_schedulefree
        require_swanlab require_tensorboard require_timm require_torchao
        require_torchdata_stateful_dataloader require_torchvision require_trackers
        require_trackio require_transformer_engine require_transformer_engine_mxfp8
        require_transformers require_triton require_wandb""",
)
_SUBPROCESSES = _names(
    f"{_HELPERS}._subprocesses",
    """DEFAULT_LAUNCH_COMMAND SubprocessCallException execute_subprocess_async
        get_launch_command get_torch_dist_unique_port path_in_accelerate_package
        pytest_xdist_worker_id run_command""",
)
_CASES = _names(
    f"{_HELPERS}._cases",
    """AccelerateTestCase MockingTestCase TempDirTestCase are_the_same_tensors
        assert_exception capture_call_output""",
)
_REGRESSION = _names(f"{_HELPERS}._regression", "RegressionDataset RegressionModel")

TEST_UTILS_PATHS: dict[str, dict[str, str]] = {
    "accel.test_utils": {
        **_DEVICES,
        **_names(
            f"{_HELPERS}._require_devices",
            """require_cpu require_cuda require_cuda_or_hpu require_cuda_or_xpu require_fp8
                require_fp16 require_mlu require_mps require_multi_device require_multi_gpu
                require_multi_gpu_or_xpu require_multi_xpu require_musa require_non_cpu
                require_non_hpu require_non_torch_xla require_non_xpu require_npu
                require_pippy require_sdaa require_single_device require_single_gpu
                require_single_xpu require_tpu require_xpu""",
        ),
        **_names(
            f"{_HELPERS}._require_libraries",
            """require_bnb require_huggingface_suite require_torchao require_torchvision
                require_transformer_engine require_transformer_engine_mxfp8""",
        ),
        **_MARKERS,
        **_SUBPROCESSES,
        **_names(
            f"{_HELPERS}._cases",
            "are_the_same_tensors assert_exception capture_call_output",
        ),
        **_REGRESSION,
    },
    "accel.test_utils.testing": {
        **_DEVICES,
        **_MARKERS,
        **_REQUIRE_DEVICES,
        **_REQUIRE_LIBRARIES,
        **_SUBPROCESSES,
        **_CASES,
        **_names(
            "accel_state",
            """AcceleratorState GradientState check_cuda_fp8_capability compare_versions
                is_aim_available is_bnb_available is_clearml_available is_comet_ml_available
                is_cuda_available is_datasets_available is_deepspeed_available
                is_dvclive_available is_fp16_available is_fp8_available is_habana_gaudi1
                is_hpu_available is_import_timer_available is_matplotlib_available
                is_mlflow_available is_mlu_available is_mps_available is_musa_available
                is_neuron_available is_npu_available is_pandas_available is_peft_available
                is_pippy_available is_pytest_available is_schedulefree_available
                is_sdaa_available is_swanlab_available is_tensorboard_available
                is_timm_available is_torch_version is_torch_xla_available is_torchao_available
                is_torchdata_stateful_dataloader_available is_torchvision_available
                is_trackio_available is_transformer_engine_available
                is_transformer_engine_mxfp8_available is_transformers_available
                is_triton_available is_wandb_available is_xpu_available parse_flag_from_env
                str_to_bool""",
        ),
        **_names("accel_collectives", "gather"),
    },
    "accel.test_utils.training": {
        **_REGRESSION,
        **_names(
            f"{_HELPERS}._mocked_data",
            "mocked_dataloaders mocked_dataloaders_for_autoregressive_models",
        ),
        **_names("accel_state", "DistributedType"),
    },
    "accel.test_utils.examples": _names(
        f"{_HELPERS}._examples",
        "clean_lines compare_against_test get_function_contents_by_name",
    ),
}

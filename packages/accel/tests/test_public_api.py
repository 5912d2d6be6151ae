"""Every documented name resolves at its documented path, with the documented signature."""

import importlib
import inspect
import subprocess
import sys

import pytest

import accel
import accel.hooks
import accel.inference
import accel.utils


@pytest.mark.parametrize("module", [accel, accel.utils, accel.inference, accel.hooks])
def test_every_exported_name_resolves(module):
    for name in module.__all__:
        assert getattr(module, name) is not None, name


def test_seed_names_at_documented_paths():
    for name in [
        "Accelerator",
        "PartialState",
        "AcceleratorState",
        "GradientState",
        "DistributedType",
        "DataLoaderConfiguration",
        "find_executable_batch_size",
        "DistributedDataParallelKwargs",
        "GradScalerKwargs",
        "InitProcessGroupKwargs",
        "AutocastKwargs",
        "ProfileKwargs",
        "skip_first_batches",
        "DeepSpeedPlugin",
    ]:
        assert name in accel.__all__, name
    for name in [
        "gather",
        "gather_object",
        "broadcast",
        "broadcast_object_list",
        "reduce",
        "pad_across_processes",
        "send_to_device",
        "recursively_apply",
        "concatenate",
        "convert_to_fp32",
        "listify",
        "slice_tensors",
        "find_batch_size",
        "set_seed",
        "synchronize_rng_state",
        "patch_environment",
        "clear_environment",
        "is_torch_version",
        "is_bf16_available",
        "write_basic_config",
        "ComputeEnvironment",
        "DynamoBackend",
        "PrecisionType",
        "RNGType",
        "SageMakerDistributedType",
        "LoggerType",
        "ProjectConfiguration",
        "GradientAccumulationPlugin",
        "TorchDynamoPlugin",
        "KwargsHandler",
        "DeepSpeedPlugin",
        "DummyOptim",
        "DummyScheduler",
        "HfDeepSpeedConfig",
    ]:
        assert name in accel.utils.__all__, name


def test_deepspeed_plugin_signature_matches_the_reference():
    params = list(inspect.signature(accel.DeepSpeedPlugin).parameters)
    assert params[:11] == [
        "hf_ds_config",
        "gradient_accumulation_steps",
        "gradient_clipping",
        "zero_stage",
        "is_train_batch_min",
        "offload_optimizer_device",
        "offload_param_device",
        "offload_optimizer_nvme_path",
        "offload_param_nvme_path",
        "zero3_init_flag",
        "zero3_save_16bit_model",
    ]
    process = inspect.signature(accel.DeepSpeedPlugin.deepspeed_config_process).parameters
    assert list(process)[1:5] == ["prefix", "mismatches", "config", "must_match"]
    assert process["must_match"].default is True


def test_accelerator_signature_matches_the_reference():
    params = inspect.signature(accel.Accelerator).parameters
    expected = [
        "device_placement",
        "split_batches",
        "mixed_precision",
        "gradient_accumulation_steps",
        "cpu",
        "dataloader_config",
        "deepspeed_plugin",
        "fsdp_plugin",
        "torch_tp_plugin",
        "megatron_lm_plugin",
        "rng_types",
        "log_with",
        "project_dir",
        "project_config",
        "gradient_accumulation_plugin",
        "step_scheduler_with_optimizer",
        "kwargs_handlers",
        "dynamo_backend",
        "dynamo_plugin",
        "deepspeed_plugins",
        "parallelism_config",
    ]
    assert list(params) == expected
    assert params["gradient_accumulation_steps"].default == 1
    assert params["step_scheduler_with_optimizer"].default is True
    assert inspect.signature(accel.Accelerator.reduce).parameters["reduction"].default == "sum"
    assert inspect.signature(accel.utils.reduce).parameters["reduction"].default == "mean"


def test_import_accel_is_lazy():
    code = "import sys, accel; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        accel.Nope  # noqa: B018
    assert importlib.import_module("accel.utils").__name__ == "accel.utils"

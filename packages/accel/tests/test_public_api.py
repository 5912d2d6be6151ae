"""Every documented name resolves at its documented path, with the documented signature."""

import ast
import importlib
import inspect
import subprocess
import sys
from pathlib import Path

import pytest

import accel
import accel.hooks
import accel.inference
import accel.utils
from accel._reexports._module_paths import PATHS

LAZY_MODULES = ["accel", "accel.utils", *sorted(PATHS)]


@pytest.mark.parametrize("name", LAZY_MODULES)
def test_every_exported_name_resolves(name):
    module = importlib.import_module(name)
    for attr in module.__all__:
        assert getattr(module, attr) is not None, attr


def _typing_surface(module_name: str) -> dict[str, str]:
    """``{name: source module}`` of the imports in a lazy module's generated type stub
    (``tools/gen_reexports.py``), the submodules it opens left out."""
    module = importlib.import_module(module_name)
    stub = Path(module.__file__).with_suffix(".pyi")
    tree = ast.parse(stub.read_text(encoding="utf-8"))
    package = (
        module_name if module.__file__.endswith("__init__.py") else module_name.rpartition(".")[0]
    )
    surface: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and not (node.level == 1 and node.module is None):
            source = importlib.util.resolve_name("." * node.level + (node.module or ""), package)
            surface.update({alias.name: source for alias in node.names})
    return surface


@pytest.mark.parametrize("name", LAZY_MODULES)
def test_typing_surface_matches_the_lazy_map(name):
    module = importlib.import_module(name)
    assert _typing_surface(name) == dict(module._EXPORTS)
    assert sorted(n for n in module.__all__ if n != "__version__") == sorted(module._EXPORTS)


def test_reference_module_paths_import_lazily():
    code = (
        "import sys, accel.state, accel.utils.modeling, accel.logging, accel.utils.dataclasses; "
        "print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_the_accelerator_loads_only_the_engine_and_checkpoint_code_a_run_uses():
    # Importing and building a one-process Accelerator loads no other engine, no checkpoint
    # writer or loader and no big-model code; the first save_state loads the writer.
    code = (
        "import sys, tempfile, torch\n"
        "from accel import Accelerator\n"
        "acc = Accelerator(cpu=True)\n"
        "model, opt = acc.prepare(torch.nn.Linear(2, 2), torch.optim.SGD([torch.zeros(1)], 0.1))\n"
        "def loaded():\n"
        "    return sorted(m for m in sys.modules if m.startswith(('accel._engines.', "
        "'accel._training_checkpoints.', 'accel_bigmodel')))\n"
        "print(loaded())\n"
        "acc.save_state(tempfile.mkdtemp())\n"
        "print(loaded())\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    before, after = (ast.literal_eval(line) for line in out.stdout.strip().splitlines())
    assert before == [
        "accel._engines._base",
        "accel._engines._context",
        "accel._engines._parallel_layout",
        "accel._training_checkpoints._checkpointer",
        "accel._training_checkpoints._prewarm",
        "accel._training_checkpoints.files",
        "accel._training_checkpoints.files._parts",
    ]
    assert "accel._training_checkpoints.save._save_pipeline" in after
    assert (
        "accel._engines.deepspeed._deepspeed" not in after
        and "accel._engines.fsdp._fsdp" not in after
    )


def test_submodules_are_attributes_on_first_use():
    assert accel.state.PartialState is accel.PartialState
    assert accel.utils.modeling.infer_auto_device_map is accel.infer_auto_device_map
    assert accel.logging.get_logger is accel.utils.other.get_logger
    assert "state" in dir(accel) and "modeling" in dir(accel.utils)


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
    # Neither torch nor importlib.metadata (``__version__`` is read on first access).
    code = "import sys, accel; print('torch' in sys.modules, 'importlib.metadata' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False False"


def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        accel.Nope  # noqa: B018
    assert importlib.import_module("accel.utils").__name__ == "accel.utils"


def test_submodule_lists_match_the_module_paths():
    top = {p.split(".")[1] for p in PATHS if p.count(".") == 1} | {"utils"}
    assert sorted(accel._SUBMODULES) == sorted(top)
    under_utils = {p.split(".")[2] for p in PATHS if p.startswith("accel.utils.")}
    assert sorted(accel.utils._SUBMODULES) == sorted(under_utils)
    test_utils = importlib.import_module("accel.test_utils")
    under_test_utils = {p.split(".")[2] for p in PATHS if p.startswith("accel.test_utils.")}
    assert sorted(test_utils._SUBMODULES) == sorted(under_test_utils | {"scripts"})

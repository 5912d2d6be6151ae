"""The owner of every name the facade re-exports: the module that defines it.

A name of an accel package is owned by that package: its ``__init__``'s ``_EXPORTS`` table is the
one place that says so, and ``owner`` reads it there. A name the facade defines itself is listed
once in ``FACADE_OWNED`` with its private module. The tables of ``_public_names`` and
``_module_paths`` only say which names each path shows (``Owned``); ``tools/gen_reexports.py``
refuses a name with no owner or with two.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from importlib import import_module

# The accel packages, lowest layer first (the order ``owner`` searches them in).
PACKAGES = (
    "accel_state",
    "accel_collectives",
    "accel_bigmodel",
    "accel_trackers",
    "accel_data",
    "accel_precision",
    "accel_pipeline",
    "accel_launch",
)


def _names(module: str, names: str) -> dict[str, str]:
    return dict.fromkeys(names.split(), module)


# The facade's own names, each with the private module that defines it.
FACADE_OWNED: dict[str, str] = {
    **_names(
        "accel._engines.deepspeed._deepspeed_helpers",
        """compile_regions_deepspeed get_active_deepspeed_plugin map_pytorch_optim_to_deepspeed""",
    ),
    **_names(
        "accel._engines.deepspeed._deepspeed_objects",
        """DeepSpeedEngineWrapper DeepSpeedOptimizerWrapper DeepSpeedSchedulerWrapper DummyOptim
        DummyScheduler""",
    ),
    **_names(
        "accel._engines.megatron._megatron_objects",
        """MegatronLMDummyScheduler MegatronLMSchedulerWrapper
        avg_losses_across_data_parallel_group gather_across_data_parallel_groups""",
    ),
    **_names(
        "accel._engines.megatron._megatron_steps",
        """AbstractTrainStep BertTrainStep GPTTrainStep T5TrainStep""",
    ),
    **_names(
        "accel._engines.deepspeed._ulysses",
        """_refuse_recurrent_layers_under_sequence_parallelism
        refuse_recurrent_layers_under_sequence_parallelism sequence_parallel_loss""",
    ),
    **_names(
        "accel._facade._accelerator",
        """Accelerator""",
    ),
    **_names(
        "accel._facade._local_sgd",
        """LocalSGD""",
    ),
    **_names(
        "accel._core._model_probes",
        """get_model_tp_size has_compiled_regions has_repeated_blocks is_peft_model
        is_repeated_blocks model_has_dtensor""",
    ),
    **_names(
        "accel._core._optimizer_wrappers",
        """AcceleratedOptimizer AcceleratedScheduler move_to_device patch_optimizer_step""",
    ),
    **_names(
        "accel._facade._prepare",
        """compile_regions""",
    ),
    **_names(
        "accel._facade._tracker_decorators",
        """on_main_process""",
    ),
    **_names(
        "accel._core._unwrap",
        """extract_model_from_parallel is_compiled_module""",
    ),
    **_names(
        "accel._reexports._as_accelerate",
        """ACCELERATE_API_VERSION AccelerateAlreadyImportedError AccelerateShadowedWarning
        install_as_accelerate is_installed_as_accelerate""",
    ),
    **_names(
        "accel._test_helpers._cases",
        """AccelerateTestCase MockingTestCase TempDirTestCase are_the_same_tensors assert_exception
        capture_call_output""",
    ),
    **_names(
        "accel._test_helpers._examples",
        """clean_lines compare_against_test get_function_contents_by_name""",
    ),
    **_names(
        "accel._test_helpers._markers",
        """require_torch_min_version run_first skip slow""",
    ),
    **_names(
        "accel._test_helpers._mocked_data",
        """mocked_dataloaders mocked_dataloaders_for_autoregressive_models""",
    ),
    **_names(
        "accel._test_helpers._regression",
        """RegressionDataset RegressionModel""",
    ),
    **_names(
        "accel._test_helpers._require_devices",
        """require_cpu require_cuda require_cuda_or_hpu require_cuda_or_xpu require_fp16
        require_fp8 require_fsdp2 require_mlu require_mps require_multi_device require_multi_gpu
        require_multi_gpu_or_xpu require_multi_xpu require_musa require_neuron require_non_cpu
        require_non_hpu require_non_torch_xla require_non_xpu require_npu require_pippy
        require_sdaa require_single_device require_single_gpu require_single_xpu require_tp
        require_tpu require_xpu""",
    ),
    **_names(
        "accel._test_helpers._require_libraries",
        """require_aim require_bnb require_clearml require_comet_ml require_datasets
        require_deepspeed require_dvclive require_huggingface_suite require_import_timer
        require_matplotlib require_mlflow require_pandas require_peft require_schedulefree
        require_swanlab require_tensorboard require_timm require_torchao
        require_torchdata_stateful_dataloader require_torchvision require_trackers
        require_trackio require_transformer_engine require_transformer_engine_mxfp8
        require_transformers require_triton require_wandb""",
    ),
    **_names(
        "accel._test_helpers._subprocesses",
        """DEFAULT_LAUNCH_COMMAND SubprocessCallException execute_subprocess_async
        get_launch_command get_torch_dist_unique_port path_in_accelerate_package
        pytest_xdist_worker_id run_command""",
    ),
    **_names(
        "accel._test_helpers._test_device",
        """device_count get_backend memory_allocated_func torch_device""",
    ),
    **_names(
        "accel._training_checkpoints.save._async_save",
        """AsyncSaveError""",
    ),
    **_names(
        "accel._training_checkpoints._fsdp_functions",
        """get_parameters_from_modules load_fsdp_model load_fsdp_optimizer save_fsdp_model
        save_fsdp_optimizer""",
    ),
    **_names(
        "accel._training_checkpoints._functional",
        """SAMPLER_NAME load_accelerator_state load_custom_state save_accelerator_state
        save_custom_state""",
    ),
    **_names(
        "accel._training_checkpoints.load._load",
        """StateRefusedError""",
    ),
    **_names(
        "accel._training_checkpoints.files._manifest",
        """CheckpointIntegrityError checkpoint_digest""",
    ),
    **_names(
        "accel._training_checkpoints._model_weights",
        """save""",
    ),
    **_names(
        "accel._training_checkpoints.save._snapshot",
        """CheckpointWriteError""",
    ),
    **_names(
        "accel._training_checkpoints.files._writer_lock",
        """CheckpointLockedError""",
    ),
    **_names(
        "accel._training_checkpoints.files._rendezvous",
        """CheckpointSyncError""",
    ),
    **_names(
        "accel._core._state_files",
        """MODEL_NAME OPTIMIZER_NAME RNG_STATE_NAME SCALER_NAME SCHEDULER_NAME
        UnsafeCheckpointError""",
    ),
    **_names(
        "accel._training_checkpoints.files._torch_load",
        """TORCH_SAFE_GLOBALS load""",
    ),
    **_names(
        "accel.commands._sagemaker_args",
        """_convert_nargs_to_dict""",
    ),
}


def owner(name: str) -> str:
    """The module that defines ``name``: a private module of the facade, or the accel package
    whose ``_EXPORTS`` lists it."""
    module = FACADE_OWNED.get(name)
    if module is not None:
        return module
    for package in PACKAGES:
        if name in import_module(package).__dict__["_EXPORTS"]:
            return package
    raise LookupError(
        f"{name!r} has no owner: it is neither in an accel package's _EXPORTS nor in the "
        "facade's FACADE_OWNED (accel/_reexports/_owners.py); add it to the table of the "
        "package that defines it."
    )


class Owned(Mapping[str, str]):
    """The names one path shows, each mapped to its owner (looked up on first access)."""

    def __init__(self, *names: str | Iterable[str]) -> None:
        self._names: dict[str, str | None] = {}
        for group in names:
            self._names.update(dict.fromkeys(group.split() if isinstance(group, str) else group))

    def __getitem__(self, name: str) -> str:
        if name not in self._names:
            raise KeyError(name)
        module = self._names[name]
        if module is None:
            module = self._names[name] = owner(name)
        return module

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

"""Which module provides each public name of ``accel``, ``accel.utils`` and ``accel.inference``.

Kept in one place so that the facade stays a thin map over the packages that own the code.
"""

from __future__ import annotations


def _names(module: str, names: str) -> dict[str, str]:
    return {name: module for name in names.split()}


STATE = _names(
    "accel_state",
    """PartialState AcceleratorState GradientState DistributedType ComputeEnvironment
    DynamoBackend PrecisionType RNGType SageMakerDistributedType KwargsHandler AutocastKwargs
    DistributedDataParallelKwargs GradScalerKwargs InitProcessGroupKwargs ProfileKwargs
    GradientAccumulationPlugin TorchDynamoPlugin ProjectConfiguration set_seed
    synchronize_rng_state synchronize_rng_states patch_environment clear_environment
    parse_flag_from_env str_to_bool is_torch_version compare_versions is_bf16_available
    is_fp16_available is_fp8_available is_cuda_available is_mps_available is_xpu_available
    is_npu_available is_torch_xla_available is_tpu_available is_deepspeed_available
    is_bnb_available is_torchao_available is_transformer_engine_available is_msamp_available
    is_transformers_available is_datasets_available is_safetensors_available
    is_tensorboard_available is_wandb_available is_comet_ml_available is_dvclive_available
    is_mlflow_available is_aim_available is_clearml_available is_pippy_available
    is_megatron_lm_available is_rich_available""",
)

STATE.update(
    _names(
        "accel_state",
        "find_executable_batch_size release_memory clear_device_cache should_reduce_batch_size",
    )
)
STATE.update(
    _names(
        "accel_state",
        """FullyShardedDataParallelPlugin TorchTensorParallelPlugin ParallelismConfig
        get_module_class_from_name DDPCommunicationHookType DeepSpeedSequenceParallelConfig
        TorchContextParallelConfig TorchTensorParallelConfig""",
    )
)
STATE.update(_names("accel_state", "MegatronLMPlugin add_model_config_to_megatron_parser"))
MEGATRON = _names(
    "accel._engines._megatron_objects",
    "MegatronLMDummyScheduler avg_losses_across_data_parallel_group",
)
MEGATRON.update(
    _names(
        "accel._engines._megatron_steps", "AbstractTrainStep BertTrainStep GPTTrainStep T5TrainStep"
    )
)

DEEPSPEED = _names("accel_state", "DeepSpeedPlugin HfDeepSpeedConfig")
DEEPSPEED.update(
    _names(
        "accel._engines._deepspeed_objects",
        """DummyOptim DummyScheduler DeepSpeedEngineWrapper DeepSpeedOptimizerWrapper
        DeepSpeedSchedulerWrapper""",
    )
)

LAUNCH = _names(
    "accel_launch", "write_basic_config prepare_sagemager_args_inputs prepare_multi_gpu_env"
)
LAUNCH.update(_names("accel_launch", "install_xla PrepareForLaunch"))
LAUNCH.update(_names("accel_state", "get_current_device_type"))

FACADE = _names("accel._facade._accelerator", "Accelerator")
FACADE.update(
    _names("accel._facade._optimizer_wrappers", "AcceleratedOptimizer AcceleratedScheduler")
)
FACADE.update(_names("accel._facade._prepare", "compile_regions"))


DATA = _names(
    "accel_data",
    "DataLoaderConfiguration prepare_data_loader skip_first_batches",
)

COLLECTIVES = _names(
    "accel_collectives",
    """DistributedOperationException TensorInformation broadcast broadcast_object_list
    concatenate convert_to_fp32 copy_tensor_to_devices find_batch_size find_device gather
    gather_object get_data_structure honor_type ignorant_find_batch_size initialize_tensors
    is_namedtuple is_tensor_information is_torch_tensor listify pad_across_processes
    recursively_apply reduce send_to_device slice_tensors""",
)

TRACKERS = _names(
    "accel_trackers",
    """GeneralTracker LoggerType TensorBoardTracker WandBTracker CometMLTracker DVCLiveTracker
    MLflowTracker AimTracker ClearMLTracker filter_trackers register_tracker""",
)

BIGMODEL = _names(
    "accel_bigmodel",
    """SAFE_WEIGHTS_INDEX_NAME SAFE_WEIGHTS_NAME WEIGHTS_INDEX_NAME WEIGHTS_NAME
    AlignDevicesHook CorruptSafetensorsError CpuOffload LoadReport MemoryEstimate ModelHook
    OffloadedWeightsLoader PrefixedDataset SequentialHook UserCpuOffloadHook
    add_hook_to_module attach_align_device_hook attach_align_device_hook_on_blocks
    attach_execution_device_hook calculate_maximum_sizes check_device_map clean_device_map
    compute_module_sizes convert_file_size_to_int cpu_offload cpu_offload_with_hook
    disk_offload dispatch_model dtype_byte_size estimate_memory
    extract_submodules_state_dict find_tied_parameters format_memory_table
    get_balanced_memory get_max_layer_size get_max_memory infer_auto_device_map
    init_empty_weights init_on_device load_checkpoint_and_dispatch load_checkpoint_in_model
    load_offloaded_weight load_offloaded_weights load_state_dict named_module_tensors
    offload_state_dict offload_weight remove_hook_from_module remove_hook_from_submodules
    retie_parameters save_offload_index set_module_tensor_to_device shard_checkpoint
    write_safetensors""",
)

PRECISION = _names(
    "accel_precision",
    """convert_outputs_to_fp32 FP8RecipeKwargs AORecipeKwargs TERecipeKwargs MSAMPRecipeKwargs
    FP8BackendType BnbQuantizationConfig load_and_quantize_model replace_with_bnb_layers
    get_keys_to_not_convert has_4bit_bnb_layers get_quantized_model_device_map
    convert_model_to_fp8_ao filter_linear_layers filter_first_and_last_linear_layers
    find_first_last_linear_layers has_ao_layers has_transformer_engine_layers""",
)

CHECKPOINT = _names(
    "accel._training_checkpoints._state_files",
    """MODEL_NAME OPTIMIZER_NAME RNG_STATE_NAME SCALER_NAME SCHEDULER_NAME WEIGHTS_NAME
    SAFE_WEIGHTS_NAME WEIGHTS_INDEX_NAME SAFE_WEIGHTS_INDEX_NAME""",
)
CHECKPOINT.update(_names("accel._training_checkpoints._state_files", "UnsafeCheckpointError"))
CHECKPOINT.update(_names("accel._training_checkpoints._manifest", "CheckpointIntegrityError"))
CHECKPOINT.update(_names("accel._training_checkpoints._manifest", "checkpoint_digest"))
CHECKPOINT.update(_names("accel._training_checkpoints._rendezvous", "CheckpointSyncError"))
CHECKPOINT.update(_names("accel._training_checkpoints._model_weights", "save"))
CHECKPOINT.update(_names("accel_bigmodel", "shard_checkpoint"))

UNWRAP = _names("accel._facade._unwrap", "extract_model_from_parallel is_compiled_module")

# More names the reference exposes at ``accelerate.utils``.
STATE.update(
    _names(
        "accel_state",
        """check_cuda_fp8_capability check_os_kernel convert_dict_to_env_variables
        get_int_from_env is_4bit_bnb_available is_8bit_bnb_available is_amdsmi_available
        is_bitsandbytes_multi_backend_available is_boto3_available is_habana_gaudi1
        is_hpu_available is_import_timer_available is_lomo_available is_matplotlib_available
        is_mlu_available is_musa_available is_neuron_available is_pandas_available
        is_peft_available is_pynvml_available is_pytest_available is_rocm_available
        is_sagemaker_available is_schedulefree_available is_sdaa_available is_swanlab_available
        is_timm_available is_torchdata_available is_torchdata_stateful_dataloader_available
        is_torchvision_available is_trackio_available is_transformer_engine_mxfp8_available
        is_triton_available is_weights_only_available is_xccl_available parse_choice_from_env
        purge_accel_environment purge_accelerate_environment wait_for_everyone
        deepspeed_required torchao_required get_free_port get_pretty_name is_port_in_use
        merge_dicts recursive_getattr CUDA_DISTRIBUTED_TYPES TORCH_DISTRIBUTED_OPERATION_TYPES
        STR_OPERATION_TO_FUNC TORCH_DYNAMO_MODES do_nothing is_initialized""",
    )
)
COLLECTIVES.update(_names("accel_collectives", "CannotPadNestedTensorWarning pad_input_tensors"))
BIGMODEL.update(
    _names(
        "accel_bigmodel",
        """align_module_device has_offloaded_params check_device_same convert_bytes
        id_tensor_storage""",
    )
)

# Reference helpers, constants and enums at ``accel.utils``.
BIGMODEL.update(
    _names(
        "accel_bigmodel",
        """SAFE_MODEL_NAME SAFE_WEIGHTS_PATTERN_NAME WEIGHTS_PATTERN_NAME CustomDtype
        check_tied_parameters_in_config check_tied_parameters_on_same_device
        clean_state_dict_for_safetensors""",
    )
)
STATE.update(_names("accel_state", "PROFILE_PATTERN_NAME tqdm"))
STATE.update(
    _names(
        "accel_state",
        """are_libraries_initialized check_cuda_p2p_ib_support get_cpu_distributed_information
        get_current_device_type get_gpu_info set_numa_affinity""",
    )
)
PRECISION.update(_names("accel_precision", "get_grad_scaler get_mixed_precision_context_manager"))
CHECKPOINT.update(_names("accel._training_checkpoints._functional", "SAMPLER_NAME"))
CHECKPOINT.update(_names("accel._training_checkpoints._torch_load", "load"))
MODEL_PROBES = _names(
    "accel._facade._model_probes",
    "get_model_tp_size has_compiled_regions is_peft_model model_has_dtensor",
)

# The exceptions a caller catches, each from the package that raises it; every one is at
# ``accel.*`` and ``accel.utils.*`` (tests/test_public_exceptions.py lists them).
ERRORS = {
    **_names(
        "accel_bigmodel",
        "CheckpointKeysError CorruptSafetensorsError DeviceMapError OffloadedFileChangedError "
        "PathOutsideCheckpointError UntrustedPickleError",
    ),
    **_names("accel_collectives", "DistributedOperationException"),
    **_names("accel_launch", "ConfigError"),
    **_names("accel_pipeline", "PipelineTraceError"),
    "AccelerateAlreadyImportedError": "accel._reexports._as_accelerate",
    "AsyncSaveError": "accel._training_checkpoints._async_save",
    "CheckpointIntegrityError": "accel._training_checkpoints._manifest",
    "CheckpointLockedError": "accel._training_checkpoints._writer_lock",
    "CheckpointSyncError": "accel._training_checkpoints._rendezvous",
    "CheckpointWriteError": "accel._training_checkpoints._snapshot",
    "StateRefusedError": "accel._training_checkpoints._load",
    "UnsafeCheckpointError": "accel._training_checkpoints._state_files",
}

# Names at ``accel.*`` (seeds 002 and 004).
TOP_LEVEL: dict[str, str] = {
    **{
        name: "accel_bigmodel"
        for name in """init_empty_weights init_on_device load_checkpoint_and_dispatch
        load_checkpoint_in_model infer_auto_device_map dispatch_model cpu_offload
        cpu_offload_with_hook disk_offload""".split()
    },
    **FACADE,
    # What a failed save_state / load_state, load or dispatch raises, for callers that catch it.
    **ERRORS,
    "DataLoaderConfiguration": "accel_data",
    "skip_first_batches": "accel_data",
    "LocalSGD": "accel._facade._local_sgd",
    "prepare_pippy": "accel_pipeline",
    "is_rich_available": "accel_state",
    "synchronize_rng_states": "accel_state",
    "debug_launcher": "accel_state",
    "notebook_launcher": "accel_launch",
    "find_executable_batch_size": "accel_state",
    "DeepSpeedPlugin": "accel_state",
    # Code that imports ``accelerate`` (transformers, PEFT, TRL, diffusers) runs on accel.
    **_names(
        "accel._reexports._as_accelerate",
        """install_as_accelerate is_installed_as_accelerate ACCELERATE_API_VERSION
        AccelerateShadowedWarning AccelerateAlreadyImportedError""",
    ),
    **{
        name: STATE[name]
        for name in """PartialState AcceleratorState GradientState DistributedType
        AutocastKwargs DDPCommunicationHookType DistributedDataParallelKwargs GradScalerKwargs InitProcessGroupKwargs
        ProfileKwargs FullyShardedDataParallelPlugin ParallelismConfig""".split()
    },
}

FSDP_API = _names(
    "accel._training_checkpoints._fsdp_functions",
    "save_fsdp_model load_fsdp_model save_fsdp_optimizer load_fsdp_optimizer",
)
FSDP_API.update(_names("accel_launch", "merge_fsdp_weights"))

# Names at ``accel.utils.*`` (seed 003).
UTILS: dict[str, str] = {
    **BIGMODEL,
    **STATE,
    **DEEPSPEED,
    **MEGATRON,
    **COLLECTIVES,
    **LAUNCH,
    **DATA,
    **PRECISION,
    **TRACKERS,
    **CHECKPOINT,
    **UNWRAP,
    **MODEL_PROBES,
    "compile_regions": FACADE["compile_regions"],
    **_names(
        "accel._engines._deepspeed_helpers",
        "compile_regions_deepspeed get_active_deepspeed_plugin map_pytorch_optim_to_deepspeed",
    ),
    **FSDP_API,
    # accel's own: the loss of DeepSpeed Ulysses sequence parallelism, averaged over the group.
    "sequence_parallel_loss": "accel._engines._ulysses",
    **ERRORS,
}

"""Which names ``accel`` and ``accel.utils`` show (their owners are found by ``_owners``).

Kept in one place so that the facade stays a thin map over the packages that own the code.
"""

from __future__ import annotations

from ._owners import Owned

# The exceptions a caller catches, each from the package that raises it; every one is at
# ``accel.*`` and ``accel.utils.*`` (tests/test_public_exceptions.py lists them).
ERRORS = """AccelerateAlreadyImportedError AsyncSaveError CheckpointIntegrityError CheckpointKeysError
    CheckpointLockedError CheckpointSyncError CheckpointWriteError ConfigError CorruptSafetensorsError DeviceMapError
    DistributedOperationException OffloadedFileChangedError PathOutsideCheckpointError
    PipelineTraceError QuantStateMismatchError StateRefusedError UnsafeCheckpointError UntrustedPickleError"""

# Names at ``accel.*``.
TOP_LEVEL = Owned(
    ERRORS,
    """ACCELERATE_API_VERSION AccelerateShadowedWarning AcceleratedOptimizer AcceleratedScheduler
    Accelerator AcceleratorState AutocastKwargs DDPCommunicationHookType DataLoaderConfiguration
    DeepSpeedPlugin DistributedDataParallelKwargs DistributedType FullyShardedDataParallelPlugin
    GradScalerKwargs GradientState InitProcessGroupKwargs LocalSGD ParallelismConfig
    PartialState ProfileKwargs compile_regions cpu_offload cpu_offload_with_hook debug_launcher
    disk_offload dispatch_model find_executable_batch_size infer_auto_device_map
    init_empty_weights init_on_device install_as_accelerate is_installed_as_accelerate
    is_rich_available load_checkpoint_and_dispatch load_checkpoint_in_model notebook_launcher
    prepare_pippy skip_first_batches synchronize_rng_states""",
)

# Names at ``accel.utils.*``.
UTILS = Owned(
    ERRORS,
    """AORecipeKwargs AbstractTrainStep AcceleratorState AimTracker AlignDevicesHook AutocastKwargs
    BertTrainStep BnbQuantizationConfig CUDA_DISTRIBUTED_TYPES CannotPadNestedTensorWarning
    ClearMLTracker CometMLTracker ComputeEnvironment CpuOffload CustomDtype
    DDPCommunicationHookType DVCLiveTracker DataLoaderConfiguration DeepSpeedEngineWrapper
    DeepSpeedOptimizerWrapper DeepSpeedPlugin DeepSpeedSchedulerWrapper
    DeepSpeedSequenceParallelConfig DistributedDataParallelKwargs DistributedType DummyOptim
    DummyScheduler DynamoBackend FP8BackendType FP8RecipeKwargs FullyShardedDataParallelPlugin
    GPTTrainStep GeneralTracker GradScalerKwargs GradientAccumulationPlugin GradientState
    HfDeepSpeedConfig InitProcessGroupKwargs KwargsHandler LoadReport LoggerType MLflowTracker
    MODEL_NAME MSAMPRecipeKwargs MegatronLMDummyScheduler MegatronLMPlugin MemoryEstimate
    ModelHook OPTIMIZER_NAME OffloadedWeightsLoader PROFILE_PATTERN_NAME ParallelismConfig
    PartialState PrecisionType PrefixedDataset PrepareForLaunch ProfileKwargs
    ProjectConfiguration RNGType RNG_STATE_NAME SAFE_MODEL_NAME SAFE_WEIGHTS_INDEX_NAME
    SAFE_WEIGHTS_NAME SAFE_WEIGHTS_PATTERN_NAME SAMPLER_NAME SCALER_NAME SCHEDULER_NAME
    STR_OPERATION_TO_FUNC SageMakerDistributedType SequentialHook T5TrainStep TERecipeKwargs
    TORCH_DISTRIBUTED_OPERATION_TYPES TORCH_DYNAMO_MODES TensorBoardTracker TensorInformation
    TorchContextParallelConfig TorchDynamoPlugin TorchTensorParallelConfig
    TorchTensorParallelPlugin UserCpuOffloadHook WEIGHTS_INDEX_NAME WEIGHTS_NAME
    WEIGHTS_PATTERN_NAME WandBTracker add_hook_to_module add_model_config_to_megatron_parser
    align_module_device are_libraries_initialized attach_align_device_hook
    attach_align_device_hook_on_blocks attach_execution_device_hook
    avg_losses_across_data_parallel_group broadcast broadcast_object_list
    calculate_maximum_sizes check_cuda_fp8_capability check_cuda_p2p_ib_support check_device_map
    check_device_same check_os_kernel check_tied_parameters_in_config
    check_tied_parameters_on_same_device checkpoint_digest clean_device_map
    clean_state_dict_for_safetensors clear_device_cache clear_environment compare_versions
    compile_regions compile_regions_deepspeed compute_module_sizes concatenate convert_bytes
    convert_dict_to_env_variables convert_file_size_to_int convert_model_to_fp8_ao
    convert_outputs_to_fp32 convert_to_fp32 copy_tensor_to_devices cpu_offload
    cpu_offload_with_hook deepspeed_required disk_offload dispatch_model do_nothing
    dtype_byte_size estimate_memory extract_model_from_parallel extract_submodules_state_dict
    filter_first_and_last_linear_layers filter_linear_layers filter_trackers find_batch_size
    find_device find_executable_batch_size find_first_last_linear_layers find_tied_parameters
    format_memory_table gather gather_object get_active_deepspeed_plugin get_balanced_memory
    get_cpu_distributed_information get_current_device_type get_data_structure get_free_port
    get_gpu_info get_grad_scaler get_int_from_env get_keys_to_not_convert get_max_layer_size
    get_max_memory get_mixed_precision_context_manager get_model_tp_size
    get_module_class_from_name get_pretty_name get_quantized_model_device_map
    has_4bit_bnb_layers has_ao_layers has_compiled_regions has_offloaded_params
    has_transformer_engine_layers honor_type id_tensor_storage ignorant_find_batch_size
    infer_auto_device_map init_empty_weights init_on_device initialize_tensors install_xla
    is_4bit_bnb_available is_8bit_bnb_available is_aim_available is_amdsmi_available
    is_bf16_available is_bitsandbytes_multi_backend_available is_bnb_available
    is_boto3_available is_clearml_available is_comet_ml_available is_compiled_module
    is_cuda_available is_datasets_available is_deepspeed_available is_dvclive_available
    is_fp16_available is_fp8_available is_habana_gaudi1 is_hpu_available
    is_import_timer_available is_initialized is_lomo_available is_matplotlib_available
    is_megatron_lm_available is_mlflow_available is_mlu_available is_mps_available
    is_msamp_available is_musa_available is_namedtuple is_neuron_available is_npu_available
    is_pandas_available is_peft_available is_peft_model is_pippy_available is_port_in_use
    is_pynvml_available is_pytest_available is_rich_available is_rocm_available
    is_safetensors_available is_sagemaker_available is_schedulefree_available is_sdaa_available
    is_swanlab_available is_tensor_information is_tensorboard_available is_timm_available
    is_torch_tensor is_torch_version is_torch_xla_available is_torchao_available
    is_torchdata_available is_torchdata_stateful_dataloader_available is_torchvision_available
    is_tpu_available is_trackio_available is_transformer_engine_available
    is_transformer_engine_mxfp8_available is_transformers_available is_triton_available
    is_wandb_available is_weights_only_available is_xccl_available is_xpu_available listify load
    load_and_quantize_model load_checkpoint_and_dispatch load_checkpoint_in_model
    load_fsdp_model load_fsdp_optimizer load_offloaded_weight load_offloaded_weights
    load_state_dict map_pytorch_optim_to_deepspeed merge_dicts merge_fsdp_weights
    model_has_dtensor named_module_tensors offload_state_dict offload_weight
    pad_across_processes pad_input_tensors parse_choice_from_env parse_flag_from_env
    patch_environment prepare_data_loader prepare_multi_gpu_env prepare_sagemager_args_inputs
    purge_accel_environment purge_accelerate_environment recursive_getattr recursively_apply
    reduce register_tracker release_memory remove_hook_from_module remove_hook_from_submodules
    replace_with_bnb_layers retie_parameters save save_fsdp_model save_fsdp_optimizer
    save_offload_index send_to_device sequence_parallel_loss set_module_tensor_to_device
    set_numa_affinity set_seed shard_checkpoint should_reduce_batch_size skip_first_batches
    slice_tensors str_to_bool synchronize_rng_state synchronize_rng_states torchao_required tqdm
    wait_for_everyone write_basic_config write_safetensors""",
)

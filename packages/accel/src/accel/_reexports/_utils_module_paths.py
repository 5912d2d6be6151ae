"""Which names each of the reference library's ``accelerate.utils.*`` module paths shows under
accel (``accel.utils.modeling``, ``accel.utils.operations`` ...), merged into
``_module_paths.PATHS``.
"""

from __future__ import annotations

from ._owners import Owned

UTILS_PATHS: dict[str, Owned] = {
    "accel.utils.ao": Owned(
        """convert_model_to_fp8_ao filter_first_and_last_linear_layers filter_linear_layers
        find_first_last_linear_layers has_ao_layers is_torchao_available torchao_required"""
    ),
    "accel.utils.bnb": Owned(
        """BnbQuantizationConfig dispatch_model find_tied_parameters get_balanced_memory
        get_keys_to_not_convert get_parameter_device get_quantized_model_device_map
        has_4bit_bnb_layers infer_auto_device_map init_empty_weights is_4bit_bnb_available
        is_8bit_bnb_available load_and_quantize_model load_checkpoint_in_model offload_weight
        quantize_and_offload_8bit replace_with_bnb_layers set_module_tensor_to_device"""
    ),
    "accel.utils.constants": Owned(
        """BETA_CP_AVAILABLE_PYTORCH_VERSION BETA_SP_AVAILABLE_DEEPSPEED_VERSION
        BETA_TP_AVAILABLE_PYTORCH_VERSION BETA_TP_AVAILABLE_TRANSFORMERS_VERSION
        CUDA_DISTRIBUTED_TYPES FSDP2_PYTORCH_VERSION FSDP2_STATE_DICT_TYPE FSDP_AUTO_WRAP_POLICY
        FSDP_BACKWARD_PREFETCH FSDP_MODEL_NAME FSDP_PYTORCH_VERSION FSDP_SHARDING_STRATEGY
        FSDP_STATE_DICT_TYPE MODEL_NAME OPTIMIZER_NAME PROFILE_PATTERN_NAME RNG_STATE_NAME
        SAFE_MODEL_NAME SAFE_WEIGHTS_INDEX_NAME SAFE_WEIGHTS_NAME SAFE_WEIGHTS_PATTERN_NAME
        SAGEMAKER_PARALLEL_EC2_INSTANCES SAGEMAKER_PYTHON_VERSION SAGEMAKER_PYTORCH_VERSION
        SAGEMAKER_TRANSFORMERS_VERSION SAMPLER_NAME SCALER_NAME SCHEDULER_NAME
        STR_OPERATION_TO_FUNC SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING
        TORCH_DISTRIBUTED_OPERATION_TYPES TORCH_DYNAMO_MODES WEIGHTS_INDEX_NAME WEIGHTS_NAME
        WEIGHTS_PATTERN_NAME"""
    ),
    "accel.utils.dataclasses": Owned(
        """AORecipeKwargs AutocastKwargs BaseEnum BnbQuantizationConfig ComputeEnvironment
        CustomDtype DDPCommunicationHookType DataLoaderConfiguration DeepSpeedPlugin
        DeepSpeedSequenceParallelConfig DistributedDataParallelKwargs DistributedType
        DynamoBackend EnumWithContains FP8BackendType FP8RecipeKwargs FSDP2_PYTORCH_VERSION
        FSDP_AUTO_WRAP_POLICY FSDP_BACKWARD_PREFETCH FSDP_SHARDING_STRATEGY
        FullyShardedDataParallelPlugin GradScalerKwargs GradientAccumulationPlugin
        InitProcessGroupKwargs KwargsHandler LoggerType MODEL_CONFIGS_TO_MEGATRON_PARSERS
        MSAMPRecipeKwargs MegatronLMPlugin PrecisionType ProfileKwargs ProjectConfiguration
        RNGType SageMakerDistributedType TERecipeKwargs TensorInformation
        TorchContextParallelConfig TorchDynamoPlugin TorchTensorParallelConfig
        TorchTensorParallelPlugin add_model_config_to_megatron_parser compare_versions
        get_module_class_from_name is_cuda_available is_hpu_available is_mlu_available
        is_msamp_available is_musa_available is_neuron_available is_npu_available
        is_rocm_available is_torch_version is_torchao_available is_transformer_engine_available
        is_xpu_available parse_bert_config parse_flag_from_env parse_glm4_moe_config
        parse_gpt2_config parse_llama_config parse_t5_config str_to_bool"""
    ),
    "accel.utils.deepspeed": Owned(
        """AcceleratedOptimizer AcceleratedScheduler DeepSpeedEngineWrapper
        DeepSpeedOptimizerWrapper DeepSpeedSchedulerWrapper DistributedType DummyOptim
        DummyScheduler HfDeepSpeedConfig compare_versions get_active_deepspeed_plugin
        is_bnb_available map_pytorch_optim_to_deepspeed"""
    ),
    "accel.utils.environment": Owned(
        """CPUInformation are_libraries_initialized check_cuda_fp8_capability
        check_cuda_p2p_ib_support clear_environment convert_dict_to_env_variables
        get_cpu_distributed_information get_current_device_type get_driver_version get_gpu_info
        get_int_from_env override_numa_affinity parse_choice_from_env parse_flag_from_env
        patch_environment purge_accelerate_environment set_numa_affinity str_to_bool"""
    ),
    "accel.utils.fsdp_utils": Owned(
        """FSDP_MODEL_NAME OPTIMIZER_NAME SAFE_WEIGHTS_NAME WEIGHTS_NAME get_logger
        get_module_class_from_name get_non_persistent_buffers get_parameters_from_modules
        is_compiled_module is_peft_model is_torch_version load_fsdp_model load_fsdp_optimizer
        merge_fsdp_weights save save_fsdp_model save_fsdp_optimizer"""
    ),
    "accel.utils.imports": Owned(
        """USE_TORCH_XLA compare_versions deepspeed_required is_4bit_bnb_available
        is_8bit_bnb_available is_aim_available is_amdsmi_available is_bf16_available
        is_bitsandbytes_multi_backend_available is_bnb_available is_boto3_available
        is_clearml_available is_comet_ml_available is_cuda_available is_datasets_available
        is_deepspeed_available is_dvclive_available is_fp16_available is_fp8_available
        is_habana_gaudi1 is_hpu_available is_import_timer_available is_lomo_available
        is_matplotlib_available is_megatron_lm_available is_mlflow_available is_mlu_available
        is_mps_available is_msamp_available is_musa_available is_neuron_available
        is_npu_available is_numpy_available is_pandas_available is_peft_available
        is_pippy_available is_pynvml_available is_pytest_available is_rich_available
        is_rocm_available is_sagemaker_available is_schedulefree_available is_sdaa_available
        is_swanlab_available is_tensorboard_available is_timm_available
        is_torch_distributed_available is_torch_version is_torch_xla_available
        is_torchao_available is_torchdata_available is_torchdata_stateful_dataloader_available
        is_torchvision_available is_tqdm_available is_trackio_available
        is_transformer_engine_available is_transformer_engine_mxfp8_available
        is_transformers_available is_triton_available is_wandb_available
        is_weights_only_available is_xccl_available is_xpu_available parse_flag_from_env
        patch_environment str_to_bool torchao_required"""
    ),
    "accel.utils.launch": Owned(
        """DistributedType DynamoBackend PrecisionType PrepareForLaunch SageMakerConfig
        SageMakerDistributedType _convert_nargs_to_dict compare_versions get_free_port
        is_fp8_available is_hpu_available is_mlu_available is_musa_available is_neuron_available
        is_npu_available is_port_in_use is_sdaa_available is_torch_xla_available
        is_xpu_available merge_dicts prepare_multi_gpu_env prepare_sagemager_args_inputs
        prepare_simple_launcher_cmd_env str_to_bool"""
    ),
    "accel.utils.megatron_lm": Owned(
        """AbstractTrainStep AcceleratedOptimizer AcceleratedScheduler BertTrainStep GPTTrainStep
        MegatronLMDummyScheduler MegatronLMSchedulerWrapper T5TrainStep
        avg_losses_across_data_parallel_group gather_across_data_parallel_groups
        is_megatron_lm_available recursively_apply send_to_device"""
    ),
    "accel.utils.memory": Owned(
        """clear_device_cache find_executable_batch_size is_cuda_available is_hpu_available
        is_mlu_available is_mps_available is_musa_available is_neuron_available is_npu_available
        is_sdaa_available is_xpu_available release_memory should_reduce_batch_size"""
    ),
    "accel.utils.modeling": Owned(
        """AcceleratorState AutocastKwargs CustomDtype DistributedType SAFE_WEIGHTS_NAME
        WEIGHTS_INDEX_NAME WEIGHTS_NAME align_module_device calculate_maximum_sizes
        check_device_map check_device_same check_tied_parameters_in_config
        check_tied_parameters_on_same_device clean_device_map clear_device_cache
        compute_module_sizes compute_module_total_buffer_size convert_file_size_to_int
        dtype_byte_size fallback_allocate find_tied_parameters get_balanced_memory
        get_grad_scaler get_max_layer_size get_max_memory get_mixed_precision_context_manager
        get_module_leaves get_module_size_with_ties get_non_persistent_buffers
        get_state_dict_from_offload get_state_dict_offloaded_model has_offloaded_params
        id_tensor_storage infer_auto_device_map is_hpu_available is_mlu_available
        is_mps_available is_musa_available is_npu_available is_peft_available is_peft_model
        is_sdaa_available is_torch_version is_torch_xla_available is_tqdm_available
        is_xpu_available load_checkpoint_in_model load_offloaded_weight load_offloaded_weights
        load_state_dict named_module_tensors offload_weight retie_parameters save_offload_index
        set_module_tensor_to_device tqdm"""
    ),
    "accel.utils.offload": Owned(
        """OffloadedWeightsLoader PrefixedDataset extract_submodules_state_dict
        load_offloaded_weight offload_state_dict offload_weight save_offload_index"""
    ),
    "accel.utils.operations": Owned(
        """AcceleratorState CannotPadNestedTensorWarning ConvertOutputsToFp32
        DistributedOperationException DistributedType PartialState TENSOR_INT_TO_DTYPE
        TENSOR_TYPE_TO_INT TORCH_DISTRIBUTED_OPERATION_TYPES TensorInformation broadcast
        broadcast_object_list chained_operation concatenate convert_outputs_to_fp32
        convert_to_fp32 copy_tensor_to_devices find_batch_size find_device gather gather_object
        gather_tensor_shape get_data_structure get_shape honor_type ignorant_find_batch_size
        initialize_tensors is_namedtuple is_npu_available is_tensor_information
        is_torch_distributed_available is_torch_tensor is_torch_version is_torch_xla_available
        is_torch_xpu_tensor listify pad_across_processes pad_input_tensors recursively_apply
        reduce send_to_device slice_tensors verify_operation"""
    ),
    "accel.utils.other": Owned(
        """DistributedType FSDP_PYTORCH_VERSION PartialState TORCH_SAFE_GLOBALS check_os_kernel
        clean_state_dict_for_safetensors compile_regions compile_regions_deepspeed convert_bytes
        extract_model_from_parallel get_free_port get_logger get_model_tp_size get_pretty_name
        has_compiled_regions has_repeated_blocks id_tensor_storage is_compiled_module
        is_deepspeed_available is_numpy_available is_port_in_use is_repeated_blocks
        is_torch_distributed_available is_torch_version is_torch_xla_available
        is_weights_only_available load merge_dicts model_has_dtensor recursive_getattr save
        wait_for_everyone write_basic_config"""
    ),
    "accel.utils.random": Owned(
        """AcceleratorState CUDA_DISTRIBUTED_TYPES DistributedType RNGType is_hpu_available
        is_mlu_available is_musa_available is_neuron_available is_npu_available
        is_sdaa_available is_torch_xla_available is_xpu_available set_seed synchronize_rng_state
        synchronize_rng_states"""
    ),
    "accel.utils.tqdm": Owned("""PartialState is_tqdm_available tqdm"""),
    "accel.utils.versions": Owned("""STR_OPERATION_TO_FUNC compare_versions is_torch_version"""),
}

"""Which module provides each name of the reference library's ``accelerate.utils.*`` module
paths under accel (``accel.utils.modeling``, ``accel.utils.operations`` ...), merged into
``_module_paths.PATHS``.
"""

from __future__ import annotations

from ._public_names import FSDP_API, _names

UTILS_PATHS: dict[str, dict[str, str]] = {
    "accel.utils.ao": {
        **_names(
            "accel_precision",
            """convert_model_to_fp8_ao filter_first_and_last_linear_layers
                filter_linear_layers find_first_last_linear_layers has_ao_layers""",
        ),
        **_names(
            "accel_state",
            """is_torchao_available torchao_required""",
        ),
    },
    "accel.utils.bnb": {
        **_names(
            "accel_bigmodel",
            """dispatch_model find_tied_parameters get_balanced_memory
                infer_auto_device_map init_empty_weights load_checkpoint_in_model
                offload_weight set_module_tensor_to_device""",
        ),
        **_names(
            "accel_precision",
            """BnbQuantizationConfig get_keys_to_not_convert
                get_quantized_model_device_map has_4bit_bnb_layers
                load_and_quantize_model quantize_and_offload_8bit replace_with_bnb_layers""",
        ),
        **_names(
            "accel_state",
            """is_4bit_bnb_available is_8bit_bnb_available""",
        ),
        **_names(
            "accel_bigmodel",
            """get_parameter_device""",
        ),
    },
    "accel.utils.constants": {
        **_names(
            "accel._training_checkpoints._state_files",
            """MODEL_NAME OPTIMIZER_NAME RNG_STATE_NAME SAFE_WEIGHTS_INDEX_NAME
                SAFE_WEIGHTS_NAME SCALER_NAME SCHEDULER_NAME WEIGHTS_INDEX_NAME
                WEIGHTS_NAME""",
        ),
        **_names(
            "accel_launch",
            """SAGEMAKER_PARALLEL_EC2_INSTANCES SAGEMAKER_PYTHON_VERSION
                SAGEMAKER_PYTORCH_VERSION SAGEMAKER_TRANSFORMERS_VERSION""",
        ),
        **_names(
            "accel_state",
            """CUDA_DISTRIBUTED_TYPES STR_OPERATION_TO_FUNC
                TORCH_DISTRIBUTED_OPERATION_TYPES TORCH_DYNAMO_MODES FSDP2_PYTORCH_VERSION
                FSDP2_STATE_DICT_TYPE FSDP_AUTO_WRAP_POLICY FSDP_BACKWARD_PREFETCH FSDP_MODEL_NAME
                FSDP_PYTORCH_VERSION FSDP_SHARDING_STRATEGY FSDP_STATE_DICT_TYPE""",
        ),
        **_names(
            "accel._training_checkpoints._functional",
            """SAMPLER_NAME""",
        ),
        **_names(
            "accel_bigmodel",
            """SAFE_MODEL_NAME SAFE_WEIGHTS_PATTERN_NAME WEIGHTS_PATTERN_NAME""",
        ),
        **_names(
            "accel_state",
            """PROFILE_PATTERN_NAME""",
        ),
        **_names(
            "accel_state",
            """BETA_CP_AVAILABLE_PYTORCH_VERSION BETA_SP_AVAILABLE_DEEPSPEED_VERSION
                BETA_TP_AVAILABLE_PYTORCH_VERSION BETA_TP_AVAILABLE_TRANSFORMERS_VERSION""",
        ),
        **_names(
            "accel_bigmodel",
            """SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING""",
        ),
    },
    "accel.utils.dataclasses": {
        **_names(
            "accel_collectives",
            """TensorInformation""",
        ),
        **_names(
            "accel_data",
            """DataLoaderConfiguration""",
        ),
        **_names(
            "accel_precision",
            """AORecipeKwargs BnbQuantizationConfig FP8BackendType FP8RecipeKwargs
                MSAMPRecipeKwargs TERecipeKwargs""",
        ),
        **_names(
            "accel_state",
            """AutocastKwargs ComputeEnvironment DDPCommunicationHookType DeepSpeedPlugin
                DistributedDataParallelKwargs DistributedType DynamoBackend
                FullyShardedDataParallelPlugin GradScalerKwargs
                GradientAccumulationPlugin InitProcessGroupKwargs KwargsHandler
                PrecisionType ProfileKwargs ProjectConfiguration RNGType
                SageMakerDistributedType TorchDynamoPlugin TorchTensorParallelPlugin
                DeepSpeedSequenceParallelConfig TorchContextParallelConfig
                TorchTensorParallelConfig MegatronLMPlugin MODEL_CONFIGS_TO_MEGATRON_PARSERS
                add_model_config_to_megatron_parser parse_bert_config parse_glm4_moe_config
                parse_gpt2_config parse_llama_config parse_t5_config FSDP2_PYTORCH_VERSION
                FSDP_AUTO_WRAP_POLICY FSDP_BACKWARD_PREFETCH FSDP_SHARDING_STRATEGY compare_versions
                get_module_class_from_name is_cuda_available
                is_hpu_available is_mlu_available is_msamp_available is_musa_available
                is_neuron_available is_npu_available is_rocm_available is_torch_version
                is_torchao_available is_transformer_engine_available is_xpu_available
                parse_flag_from_env str_to_bool""",
        ),
        **_names(
            "accel_trackers",
            """LoggerType""",
        ),
        **_names(
            "accel_bigmodel",
            """CustomDtype""",
        ),
        **_names(
            "accel_state",
            """BaseEnum EnumWithContains""",
        ),
    },
    "accel.utils.deepspeed": {
        **_names(
            "accel._engines._deepspeed_helpers",
            """get_active_deepspeed_plugin map_pytorch_optim_to_deepspeed""",
        ),
        **_names(
            "accel._engines._deepspeed_objects",
            """DeepSpeedEngineWrapper DeepSpeedOptimizerWrapper
                DeepSpeedSchedulerWrapper DummyOptim DummyScheduler""",
        ),
        **_names(
            "accel._facade._optimizer_wrappers",
            """AcceleratedOptimizer AcceleratedScheduler""",
        ),
        **_names(
            "accel_state",
            """DistributedType HfDeepSpeedConfig compare_versions is_bnb_available""",
        ),
    },
    "accel.utils.environment": {
        **_names(
            "accel_state",
            """check_cuda_fp8_capability clear_environment
                convert_dict_to_env_variables get_current_device_type get_int_from_env parse_choice_from_env
                parse_flag_from_env patch_environment purge_accelerate_environment
                str_to_bool""",
        ),
        **_names(
            "accel_state",
            """CPUInformation are_libraries_initialized check_cuda_p2p_ib_support get_cpu_distributed_information get_current_device_type get_driver_version get_gpu_info override_numa_affinity set_numa_affinity""",
        ),
    },
    "accel.utils.fsdp_utils": {
        **_names(
            "accel._training_checkpoints._state_files",
            """OPTIMIZER_NAME SAFE_WEIGHTS_NAME WEIGHTS_NAME""",
        ),
        **_names(
            "accel._training_checkpoints._model_weights",
            """save""",
        ),
        **_names(
            "accel._facade._unwrap",
            """is_compiled_module""",
        ),
        **_names(
            "accel_bigmodel",
            """get_non_persistent_buffers""",
        ),
        **_names(
            "accel_state",
            """get_logger get_module_class_from_name is_torch_version FSDP_MODEL_NAME""",
        ),
        **_names(
            "accel._facade._model_probes",
            """is_peft_model""",
        ),
        **FSDP_API,
        **_names("accel._training_checkpoints._fsdp_functions", "get_parameters_from_modules"),
    },
    "accel.utils.imports": {
        **_names("accel_state", """USE_TORCH_XLA"""),
        **_names(
            "accel_state",
            """compare_versions deepspeed_required is_4bit_bnb_available
                is_8bit_bnb_available is_aim_available is_amdsmi_available
                is_bf16_available is_bitsandbytes_multi_backend_available
                is_bnb_available is_boto3_available is_clearml_available
                is_comet_ml_available is_cuda_available is_datasets_available
                is_deepspeed_available is_dvclive_available is_fp16_available
                is_fp8_available is_habana_gaudi1 is_hpu_available
                is_import_timer_available is_lomo_available is_matplotlib_available
                is_megatron_lm_available is_mlflow_available is_mlu_available
                is_mps_available is_msamp_available is_musa_available
                is_neuron_available is_npu_available is_numpy_available
                is_pandas_available is_peft_available is_pippy_available
                is_pynvml_available is_pytest_available is_rich_available
                is_rocm_available is_sagemaker_available is_schedulefree_available
                is_sdaa_available is_swanlab_available is_tensorboard_available
                is_timm_available is_torch_distributed_available is_torch_version
                is_torch_xla_available is_torchao_available is_torchdata_available
                is_torchdata_stateful_dataloader_available is_torchvision_available
                is_tqdm_available is_trackio_available is_transformer_engine_available
                is_transformer_engine_mxfp8_available is_transformers_available
                is_triton_available is_wandb_available is_weights_only_available
                is_xccl_available is_xpu_available parse_flag_from_env patch_environment
                str_to_bool torchao_required""",
        ),
    },
    "accel.utils.launch": {
        **_names(
            "accel_launch",
            """PrepareForLaunch SageMakerConfig prepare_multi_gpu_env
                prepare_sagemager_args_inputs prepare_simple_launcher_cmd_env""",
        ),
        **_names(
            "accel.commands._sagemaker_args",
            """_convert_nargs_to_dict""",
        ),
        **_names(
            "accel_state",
            """DistributedType DynamoBackend PrecisionType SageMakerDistributedType
                compare_versions get_free_port is_fp8_available is_hpu_available
                is_mlu_available is_musa_available is_neuron_available is_npu_available
                is_port_in_use is_sdaa_available is_torch_xla_available is_xpu_available
                merge_dicts str_to_bool""",
        ),
    },
    "accel.utils.megatron_lm": {
        **_names(
            "accel._engines._megatron_objects",
            """MegatronLMDummyScheduler MegatronLMSchedulerWrapper
                avg_losses_across_data_parallel_group gather_across_data_parallel_groups""",
        ),
        **_names(
            "accel._engines._megatron_steps",
            """AbstractTrainStep BertTrainStep GPTTrainStep T5TrainStep""",
        ),
        **_names(
            "accel._facade._optimizer_wrappers",
            """AcceleratedOptimizer AcceleratedScheduler""",
        ),
        **_names(
            "accel_collectives",
            """recursively_apply send_to_device""",
        ),
        **_names(
            "accel_state",
            """is_megatron_lm_available""",
        ),
    },
    "accel.utils.memory": {
        **_names(
            "accel_state",
            """clear_device_cache find_executable_batch_size is_cuda_available
                is_hpu_available is_mlu_available is_mps_available is_musa_available
                is_neuron_available is_npu_available is_sdaa_available is_xpu_available
                release_memory should_reduce_batch_size""",
        ),
    },
    "accel.utils.modeling": {
        **_names(
            "accel._training_checkpoints._state_files",
            """SAFE_WEIGHTS_NAME WEIGHTS_INDEX_NAME WEIGHTS_NAME""",
        ),
        **_names(
            "accel_bigmodel",
            """align_module_device calculate_maximum_sizes check_device_map
                check_device_same clean_device_map compute_module_sizes
                compute_module_total_buffer_size convert_file_size_to_int
                dtype_byte_size find_tied_parameters get_balanced_memory
                get_max_layer_size get_max_memory get_module_size_with_ties
                get_non_persistent_buffers get_state_dict_from_offload
                get_state_dict_offloaded_model has_offloaded_params id_tensor_storage
                infer_auto_device_map load_checkpoint_in_model load_offloaded_weight
                load_offloaded_weights load_state_dict named_module_tensors
                offload_weight retie_parameters save_offload_index
                set_module_tensor_to_device""",
        ),
        **_names(
            "accel_state",
            """AcceleratorState AutocastKwargs DistributedType clear_device_cache
                is_hpu_available is_mlu_available is_mps_available is_musa_available
                is_npu_available is_peft_available is_sdaa_available is_torch_version
                is_torch_xla_available is_tqdm_available is_xpu_available""",
        ),
        **_names(
            "accel._facade._model_probes",
            """is_peft_model""",
        ),
        **_names(
            "accel_bigmodel",
            """CustomDtype check_tied_parameters_in_config check_tied_parameters_on_same_device fallback_allocate get_module_leaves""",
        ),
        **_names(
            "accel_precision",
            """get_grad_scaler get_mixed_precision_context_manager""",
        ),
        **_names(
            "accel_state",
            """tqdm""",
        ),
    },
    "accel.utils.offload": {
        **_names(
            "accel_bigmodel",
            """OffloadedWeightsLoader PrefixedDataset extract_submodules_state_dict
                load_offloaded_weight offload_state_dict offload_weight
                save_offload_index""",
        ),
    },
    "accel.utils.operations": {
        **_names(
            "accel_collectives",
            """CannotPadNestedTensorWarning DistributedOperationException
                TensorInformation broadcast broadcast_object_list concatenate
                convert_to_fp32 copy_tensor_to_devices find_batch_size find_device
                gather gather_object get_data_structure get_shape honor_type
                ignorant_find_batch_size initialize_tensors is_namedtuple
                is_tensor_information is_torch_tensor listify pad_across_processes
                pad_input_tensors recursively_apply reduce send_to_device slice_tensors""",
        ),
        **_names(
            "accel_precision",
            """convert_outputs_to_fp32""",
        ),
        **_names(
            "accel_state",
            """AcceleratorState DistributedType PartialState
                TORCH_DISTRIBUTED_OPERATION_TYPES is_npu_available
                is_torch_distributed_available is_torch_version is_torch_xla_available""",
        ),
        **_names(
            "accel_collectives",
            """TENSOR_INT_TO_DTYPE TENSOR_TYPE_TO_INT chained_operation gather_tensor_shape is_torch_xpu_tensor verify_operation""",
        ),
        **_names(
            "accel_precision",
            """ConvertOutputsToFp32""",
        ),
    },
    "accel.utils.other": {
        **_names(
            "accel._engines._deepspeed_helpers",
            """compile_regions_deepspeed""",
        ),
        **_names(
            "accel._facade._prepare",
            """compile_regions""",
        ),
        **_names(
            "accel._training_checkpoints._model_weights",
            """save""",
        ),
        **_names(
            "accel._facade._unwrap",
            """extract_model_from_parallel is_compiled_module""",
        ),
        **_names(
            "accel_bigmodel",
            """convert_bytes id_tensor_storage""",
        ),
        **_names(
            "accel_launch",
            """write_basic_config""",
        ),
        **_names(
            "accel_state",
            """DistributedType PartialState check_os_kernel get_free_port get_logger
                get_pretty_name is_deepspeed_available is_numpy_available is_port_in_use
                FSDP_PYTORCH_VERSION
                is_torch_distributed_available is_torch_version is_torch_xla_available
                is_weights_only_available merge_dicts recursive_getattr
                wait_for_everyone""",
        ),
        **_names(
            "accel._facade._model_probes",
            """get_model_tp_size has_compiled_regions has_repeated_blocks is_repeated_blocks model_has_dtensor""",
        ),
        **_names(
            "accel._training_checkpoints._torch_load",
            """TORCH_SAFE_GLOBALS load""",
        ),
        **_names(
            "accel_bigmodel",
            """clean_state_dict_for_safetensors""",
        ),
    },
    "accel.utils.random": {
        **_names(
            "accel_state",
            """AcceleratorState CUDA_DISTRIBUTED_TYPES DistributedType RNGType
                is_hpu_available is_mlu_available is_musa_available is_neuron_available
                is_npu_available is_sdaa_available is_torch_xla_available
                is_xpu_available set_seed synchronize_rng_state synchronize_rng_states""",
        ),
    },
    "accel.utils.tqdm": {
        **_names(
            "accel_state",
            """PartialState is_tqdm_available tqdm""",
        ),
    },
    "accel.utils.versions": {
        **_names(
            "accel_state",
            """STR_OPERATION_TO_FUNC compare_versions is_torch_version""",
        ),
    },
}

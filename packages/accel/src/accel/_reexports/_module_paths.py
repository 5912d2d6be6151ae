"""Which names each of the reference library's module paths shows under accel.

One table per module path (``accel.state``, ``accel.utils.modeling`` ...): the names only, whose
owners ``_owners`` finds. The modules at those paths are generated from these tables by
``tools/gen_reexports.py``; ``tests/test_module_paths.py`` keeps them honest against the
reference. The tables of the ``accel.utils.*`` paths are in ``_utils_module_paths``, those of
``accel.test_utils.*`` in ``_test_utils_module_paths``.
"""

from __future__ import annotations

from ._owners import Owned
from ._test_utils_module_paths import TEST_UTILS_PATHS
from ._utils_module_paths import UTILS_PATHS

PATHS: dict[str, Owned] = {
    "accel.accelerator": Owned(
        """AORecipeKwargs AcceleratedOptimizer AcceleratedScheduler Accelerator AcceleratorState
        AutocastKwargs DataLoaderConfiguration DataLoaderDispatcher DeepSpeedEngineWrapper
        DeepSpeedOptimizerWrapper DeepSpeedPlugin DeepSpeedSchedulerWrapper
        DistributedDataParallelKwargs DistributedType DummyOptim DummyScheduler DynamoBackend
        FP8BackendType FP8RecipeKwargs FSDP2_PYTORCH_VERSION FSDP_PYTORCH_VERSION
        FullyShardedDataParallelPlugin GeneralTracker GradScalerKwargs
        GradientAccumulationPlugin GradientState InitProcessGroupKwargs KwargsHandler
        LOGGER_TYPE_TO_CLASS LoggerType MODEL_NAME MSAMPRecipeKwargs MegatronLMPlugin
        PROFILE_PATTERN_NAME ParallelismConfig PartialState PrecisionType ProfileKwargs
        ProjectConfiguration RNGType SAFE_WEIGHTS_INDEX_NAME SAFE_WEIGHTS_NAME
        SAFE_WEIGHTS_PATTERN_NAME SCALER_NAME TERecipeKwargs TorchDynamoPlugin
        TorchTensorParallelPlugin WEIGHTS_INDEX_NAME WEIGHTS_NAME WEIGHTS_PATTERN_NAME
        check_os_kernel clean_state_dict_for_safetensors compare_versions compile_regions
        compile_regions_deepspeed convert_model_to_fp8_ao convert_outputs_to_fp32
        extract_model_from_parallel filter_trackers gather gather_object get_grad_scaler
        get_logger get_mixed_precision_context_manager get_model_tp_size get_pretty_name
        get_state_dict_offloaded_model has_offloaded_params is_bf16_available
        is_bitsandbytes_multi_backend_available is_compiled_module is_deepspeed_available
        is_lomo_available is_megatron_lm_available is_mlu_available is_msamp_available
        is_musa_available is_npu_available is_torch_version is_torch_xla_available
        is_torchao_available is_transformer_engine_available is_xpu_available
        load_accelerator_state load_custom_state load_fsdp_model load_fsdp_optimizer
        map_pytorch_optim_to_deepspeed model_has_dtensor pad_across_processes
        parse_choice_from_env prepare_data_loader recursively_apply reduce release_memory save
        save_accelerator_state save_custom_state save_fsdp_model save_fsdp_optimizer
        skip_first_batches wait_for_everyone"""
    ),
    # The reference's command modules that only re-export (the others define a ``main``).
    "accel.commands.to_fsdp2": Owned(
        "convert_config_to_fsdp2 to_fsdp2_command to_fsdp2_command_parser"
    ),
    "accel.commands.tpu": Owned("tpu_command_launcher tpu_command_parser"),
    "accel.parallelism_config": Owned(
        """DeepSpeedSequenceParallelConfig DistributedType ParallelismConfig
        TorchContextParallelConfig TorchTensorParallelConfig is_torch_version"""
    ),
    "accel.big_modeling": Owned(
        """AlignDevicesHook CpuOffload LayerwiseCastingHook OffloadedWeightsLoader
        SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING UserCpuOffloadHook
        _refuse_recurrent_layers_under_sequence_parallelism add_hook_to_module
        attach_align_device_hook attach_align_device_hook_on_blocks
        attach_layerwise_casting_hooks check_cuda_p2p_ib_support check_device_map cpu_offload
        cpu_offload_with_hook disk_offload dispatch_model extract_submodules_state_dict
        find_tied_parameters get_balanced_memory infer_auto_device_map init_empty_weights
        init_on_device is_bnb_available is_mlu_available is_musa_available is_neuron_available
        is_npu_available is_sdaa_available is_xpu_available load_checkpoint_and_dispatch
        load_checkpoint_in_model offload_state_dict parse_flag_from_env recursive_getattr
        refuse_recurrent_layers_under_sequence_parallelism retie_parameters"""
    ),
    "accel.checkpointing": Owned(
        """MODEL_NAME OPTIMIZER_NAME PartialState RNG_STATE_NAME SAFE_MODEL_NAME SAFE_WEIGHTS_NAME
        SAMPLER_NAME SCALER_NAME SCHEDULER_NAME WEIGHTS_NAME get_logger get_pretty_name
        is_cuda_available is_hpu_available is_mlu_available is_musa_available
        is_neuron_available is_sdaa_available is_torch_version is_torch_xla_available
        is_xpu_available load load_accelerator_state load_custom_state save
        save_accelerator_state save_custom_state"""
    ),
    "accel.data_loader": Owned(
        """BatchSamplerShard DataLoaderAdapter DataLoaderDispatcher DataLoaderShard
        DataLoaderStateMixin DistributedType GradientState IterableDatasetShard
        MpDeviceLoaderWrapper PartialState RNGType SeedableRandomSampler SkipBatchSampler
        SkipDataLoader broadcast broadcast_object_list compare_versions concatenate
        find_batch_size get_data_structure get_logger get_sampler initialize_tensors
        is_datasets_available is_torch_version is_torch_xla_available
        is_torchdata_stateful_dataloader_available prepare_data_loader send_to_device
        skip_first_batches slice_tensors synchronize_rng_states"""
    ),
    "accel.hooks": Owned(
        """AlignDevicesHook CpuOffload LayerwiseCastingHook ModelHook PartialState PrefixedDataset
        SequentialHook UserCpuOffloadHook add_hook_to_module attach_align_device_hook
        attach_align_device_hook_on_blocks attach_execution_device_hook clear_device_cache
        find_device get_non_persistent_buffers is_mlu_available is_musa_available
        is_npu_available named_module_tensors recursive_getattr remove_hook_from_module
        remove_hook_from_submodules send_to_device set_module_tensor_to_device"""
    ),
    "accel.inference": Owned(
        """PartialState build_pipeline calculate_maximum_sizes convert_bytes copy_tensor_to_devices
        find_pippy_batch_size generate_device_map ignorant_find_batch_size infer_auto_device_map
        is_pippy_available pad_input_tensors pippy_forward prepare_pippy send_to_device"""
    ),
    "accel.launchers": Owned(
        """AcceleratorState PartialState PrecisionType PrepareForLaunch are_libraries_initialized
        check_cuda_p2p_ib_support debug_launcher get_current_device_type get_gpu_info
        is_mps_available is_rocm_available is_torch_version notebook_launcher patch_environment"""
    ),
    "accel.logging": Owned("""MultiProcessAdapter PartialState get_logger"""),
    "accel.local_sgd": Owned("""Accelerator DistributedType LocalSGD"""),
    "accel.optimizer": Owned(
        """AcceleratedOptimizer AcceleratorState DistributedType GradientState honor_type
        is_lomo_available is_torch_xla_available move_to_device patch_optimizer_step"""
    ),
    "accel.scheduler": Owned("""AcceleratedScheduler AcceleratorState GradientState"""),
    "accel.state": Owned(
        """AcceleratorState DistributedType DynamoBackend GradientAccumulationPlugin GradientState
        PartialState SageMakerDistributedType ThreadLocalSharedDict check_cuda_fp8_capability
        check_cuda_p2p_ib_support deepspeed_required do_nothing get_cpu_distributed_information
        get_int_from_env is_datasets_available is_deepspeed_available is_fp8_available
        is_habana_gaudi1 is_hpu_available is_initialized is_mlu_available is_mps_available
        is_musa_available is_neuron_available is_npu_available is_sdaa_available
        is_torch_xla_available is_xccl_available is_xpu_available parse_choice_from_env
        parse_flag_from_env set_numa_affinity"""
    ),
    "accel.tracking": Owned(
        """AimTracker ClearMLTracker CometMLTracker DVCLiveTracker GeneralTracker
        LOGGER_TYPE_TO_CLASS LoggerType MLflowTracker PartialState SwanLabTracker
        TensorBoardTracker TrackioTracker WandBTracker compare_versions filter_trackers
        get_available_trackers get_logger is_aim_available is_clearml_available
        is_comet_ml_available is_dvclive_available is_mlflow_available is_swanlab_available
        is_tensorboard_available is_trackio_available is_wandb_available listify on_main_process
        register_tracker_class str_to_bool"""
    ),
    **UTILS_PATHS,
    **TEST_UTILS_PATHS,
}

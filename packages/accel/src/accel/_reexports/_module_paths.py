"""Which module provides each name of the reference library's module paths under accel.

One map per module path (``accel.state``, ``accel.utils.modeling`` ...), each name pointing
at the accel package that owns it. The modules at those paths are thin lazy re-exports of
these maps; ``tests/test_module_paths.py`` keeps them honest against the reference. The maps of
the ``accel.utils.*`` paths are in ``_utils_module_paths``, those of ``accel.test_utils.*``
in ``_test_utils_module_paths``.
"""

from __future__ import annotations

from ._public_names import _names
from ._test_utils_module_paths import TEST_UTILS_PATHS
from ._utils_module_paths import UTILS_PATHS

PATHS: dict[str, dict[str, str]] = {
    "accel.accelerator": {
        **_names(
            "accel_precision",
            """AORecipeKwargs FP8BackendType FP8RecipeKwargs MSAMPRecipeKwargs TERecipeKwargs
                convert_model_to_fp8_ao convert_outputs_to_fp32 get_grad_scaler
                get_mixed_precision_context_manager""",
        ),
        **_names(
            "accel._facade._optimizer_wrappers",
            """AcceleratedOptimizer AcceleratedScheduler""",
        ),
        **_names(
            "accel._facade._accelerator",
            """Accelerator""",
        ),
        **_names(
            "accel_state",
            """AcceleratorState AutocastKwargs DeepSpeedPlugin DistributedDataParallelKwargs
                DistributedType DynamoBackend FSDP2_PYTORCH_VERSION FSDP_PYTORCH_VERSION
                FullyShardedDataParallelPlugin GradScalerKwargs GradientAccumulationPlugin
                GradientState InitProcessGroupKwargs KwargsHandler MegatronLMPlugin
                PROFILE_PATTERN_NAME ParallelismConfig PartialState PrecisionType ProfileKwargs
                ProjectConfiguration RNGType TorchDynamoPlugin TorchTensorParallelPlugin
                check_os_kernel compare_versions get_logger get_pretty_name is_bf16_available
                is_bitsandbytes_multi_backend_available is_deepspeed_available is_lomo_available
                is_megatron_lm_available is_mlu_available is_msamp_available is_musa_available
                is_npu_available is_torch_version is_torch_xla_available is_torchao_available
                is_transformer_engine_available is_xpu_available parse_choice_from_env
                release_memory wait_for_everyone""",
        ),
        **_names(
            "accel_data",
            """DataLoaderConfiguration DataLoaderDispatcher prepare_data_loader
                skip_first_batches""",
        ),
        **_names(
            "accel._engines._deepspeed_objects",
            """DeepSpeedEngineWrapper DeepSpeedOptimizerWrapper DeepSpeedSchedulerWrapper
                DummyOptim DummyScheduler""",
        ),
        **_names(
            "accel_trackers",
            """GeneralTracker LOGGER_TYPE_TO_CLASS LoggerType filter_trackers""",
        ),
        **_names(
            "accel._training_checkpoints._state_files",
            """MODEL_NAME SAFE_WEIGHTS_INDEX_NAME SAFE_WEIGHTS_NAME SCALER_NAME
                WEIGHTS_INDEX_NAME WEIGHTS_NAME""",
        ),
        **_names(
            "accel_bigmodel",
            """SAFE_WEIGHTS_PATTERN_NAME WEIGHTS_PATTERN_NAME clean_state_dict_for_safetensors
                get_state_dict_offloaded_model has_offloaded_params""",
        ),
        **_names(
            "accel._facade._prepare",
            """compile_regions""",
        ),
        **_names(
            "accel._engines._deepspeed_helpers",
            """compile_regions_deepspeed map_pytorch_optim_to_deepspeed""",
        ),
        **_names(
            "accel._facade._unwrap",
            """extract_model_from_parallel is_compiled_module""",
        ),
        **_names(
            "accel_collectives",
            """gather gather_object pad_across_processes recursively_apply reduce""",
        ),
        **_names(
            "accel._facade._model_probes",
            """get_model_tp_size model_has_dtensor""",
        ),
        **_names(
            "accel._training_checkpoints._functional",
            """load_accelerator_state load_custom_state save_accelerator_state
                save_custom_state""",
        ),
        **_names(
            "accel._training_checkpoints._fsdp_functions",
            """load_fsdp_model load_fsdp_optimizer save_fsdp_model save_fsdp_optimizer""",
        ),
        **_names(
            "accel._training_checkpoints._model_weights",
            """save""",
        ),
    },
    "accel.parallelism_config": _names(
        "accel_state",
        """DeepSpeedSequenceParallelConfig DistributedType ParallelismConfig
            TorchContextParallelConfig TorchTensorParallelConfig is_torch_version""",
    ),
    "accel.big_modeling": {
        **_names(
            "accel_bigmodel",
            """AlignDevicesHook CpuOffload OffloadedWeightsLoader UserCpuOffloadHook
                add_hook_to_module attach_align_device_hook
                attach_align_device_hook_on_blocks check_device_map cpu_offload
                cpu_offload_with_hook disk_offload dispatch_model
                extract_submodules_state_dict find_tied_parameters get_balanced_memory
                infer_auto_device_map init_empty_weights init_on_device
                load_checkpoint_and_dispatch load_checkpoint_in_model offload_state_dict
                retie_parameters""",
        ),
        **_names(
            "accel_state",
            """is_bnb_available is_mlu_available is_musa_available is_neuron_available
                is_npu_available is_sdaa_available is_xpu_available parse_flag_from_env
                recursive_getattr""",
        ),
        **_names(
            "accel_bigmodel",
            """LayerwiseCastingHook SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING
                attach_layerwise_casting_hooks""",
        ),
        **_names(
            "accel_state",
            """check_cuda_p2p_ib_support""",
        ),
        **_names(
            "accel._engines._ulysses",
            """refuse_recurrent_layers_under_sequence_parallelism
                _refuse_recurrent_layers_under_sequence_parallelism""",
        ),
    },
    "accel.checkpointing": {
        **_names(
            "accel._training_checkpoints._state_files",
            """MODEL_NAME OPTIMIZER_NAME RNG_STATE_NAME SAFE_WEIGHTS_NAME SCALER_NAME
                SCHEDULER_NAME WEIGHTS_NAME""",
        ),
        **_names(
            "accel._training_checkpoints._model_weights",
            """save""",
        ),
        **_names(
            "accel_state",
            """PartialState get_logger get_pretty_name is_cuda_available
                is_hpu_available is_mlu_available is_musa_available is_neuron_available
                is_sdaa_available is_torch_version is_torch_xla_available
                is_xpu_available""",
        ),
        **_names(
            "accel._training_checkpoints._functional",
            """SAMPLER_NAME load_accelerator_state load_custom_state
                save_accelerator_state save_custom_state""",
        ),
        **_names(
            "accel._training_checkpoints._torch_load",
            """load""",
        ),
        **_names(
            "accel_bigmodel",
            """SAFE_MODEL_NAME""",
        ),
    },
    "accel.data_loader": {
        **_names(
            "accel_collectives",
            """broadcast broadcast_object_list concatenate find_batch_size
                get_data_structure initialize_tensors send_to_device slice_tensors""",
        ),
        **_names(
            "accel_data",
            """BatchSamplerShard DataLoaderDispatcher DataLoaderShard
                IterableDatasetShard SeedableRandomSampler SkipBatchSampler
                SkipDataLoader prepare_data_loader skip_first_batches""",
        ),
        **_names(
            "accel_state",
            """DistributedType GradientState PartialState RNGType compare_versions
                get_logger is_datasets_available is_torch_version is_torch_xla_available
                is_torchdata_stateful_dataloader_available synchronize_rng_states""",
        ),
        **_names(
            "accel_data",
            """DataLoaderAdapter DataLoaderStateMixin get_sampler""",
        ),
        **_names("accel_data", """MpDeviceLoaderWrapper"""),
    },
    "accel.hooks": {
        **_names(
            "accel_bigmodel",
            """AlignDevicesHook CpuOffload ModelHook PrefixedDataset SequentialHook
                UserCpuOffloadHook add_hook_to_module attach_align_device_hook
                attach_align_device_hook_on_blocks attach_execution_device_hook
                get_non_persistent_buffers named_module_tensors remove_hook_from_module
                remove_hook_from_submodules set_module_tensor_to_device""",
        ),
        **_names(
            "accel_collectives",
            """find_device send_to_device""",
        ),
        **_names(
            "accel_state",
            """PartialState clear_device_cache is_mlu_available is_musa_available
                is_npu_available recursive_getattr""",
        ),
        **_names(
            "accel_bigmodel",
            """LayerwiseCastingHook""",
        ),
    },
    "accel.inference": {
        **_names(
            "accel_bigmodel",
            """calculate_maximum_sizes convert_bytes infer_auto_device_map""",
        ),
        **_names(
            "accel_collectives",
            """copy_tensor_to_devices ignorant_find_batch_size pad_input_tensors
                send_to_device""",
        ),
        **_names(
            "accel_pipeline",
            """build_pipeline find_pippy_batch_size generate_device_map pippy_forward
                prepare_pippy""",
        ),
        **_names(
            "accel_state",
            """PartialState is_pippy_available""",
        ),
    },
    "accel.launchers": {
        **_names(
            "accel_state",
            """AcceleratorState PartialState PrecisionType debug_launcher
                get_current_device_type is_mps_available is_rocm_available is_torch_version
                patch_environment""",
        ),
        **_names(
            "accel_launch",
            """PrepareForLaunch notebook_launcher""",
        ),
        **_names(
            "accel_state",
            """are_libraries_initialized check_cuda_p2p_ib_support get_current_device_type
                get_gpu_info""",
        ),
    },
    "accel.logging": {
        **_names(
            "accel_state",
            """MultiProcessAdapter PartialState get_logger""",
        ),
    },
    "accel.local_sgd": {
        **_names("accel._facade._accelerator", "Accelerator"),
        **_names("accel._facade._local_sgd", "LocalSGD"),
        **_names("accel_state", "DistributedType"),
    },
    "accel.optimizer": {
        **_names(
            "accel._facade._optimizer_wrappers",
            """AcceleratedOptimizer move_to_device patch_optimizer_step""",
        ),
        **_names(
            "accel_collectives",
            """honor_type""",
        ),
        **_names(
            "accel_state",
            """AcceleratorState DistributedType GradientState is_lomo_available
                is_torch_xla_available""",
        ),
    },
    "accel.scheduler": {
        **_names(
            "accel._facade._optimizer_wrappers",
            """AcceleratedScheduler""",
        ),
        **_names(
            "accel_state",
            """AcceleratorState GradientState""",
        ),
    },
    "accel.state": {
        **_names(
            "accel_state",
            """AcceleratorState DistributedType DynamoBackend
                GradientAccumulationPlugin GradientState PartialState
                SageMakerDistributedType ThreadLocalSharedDict check_cuda_fp8_capability
                deepspeed_required do_nothing get_int_from_env is_datasets_available is_deepspeed_available
                is_fp8_available is_habana_gaudi1 is_hpu_available is_initialized
                is_mlu_available is_mps_available is_musa_available is_neuron_available
                is_npu_available is_sdaa_available is_torch_xla_available
                is_xccl_available is_xpu_available parse_choice_from_env
                parse_flag_from_env""",
        ),
        **_names(
            "accel_state",
            """check_cuda_p2p_ib_support get_cpu_distributed_information set_numa_affinity""",
        ),
    },
    "accel.tracking": {
        **_names(
            "accel_collectives",
            """listify""",
        ),
        **_names(
            "accel_state",
            """PartialState compare_versions get_logger is_aim_available
                is_clearml_available is_comet_ml_available is_dvclive_available
                is_mlflow_available is_swanlab_available is_tensorboard_available
                is_trackio_available is_wandb_available str_to_bool""",
        ),
        **_names(
            "accel_trackers",
            """AimTracker ClearMLTracker CometMLTracker DVCLiveTracker GeneralTracker
                LOGGER_TYPE_TO_CLASS LoggerType MLflowTracker SwanLabTracker
                TensorBoardTracker TrackioTracker WandBTracker filter_trackers
                get_available_trackers register_tracker_class""",
        ),
        **_names(
            "accel._facade._tracker_decorators",
            """on_main_process""",
        ),
    },
    **UTILS_PATHS,
    **TEST_UTILS_PATHS,
}

"""Big-model inference: empty-weight init, device maps, offload hooks and streaming safetensors loading. Depends only on torch and safetensors."""

from importlib import import_module as _import_module
from importlib.metadata import version as _version
from typing import TYPE_CHECKING, Any

# Public name -> private module, loaded on first use: importing this package imports
# nothing heavy (torch loads with the first name that needs it).
_EXPORTS = {
    "SAFE_MODEL_NAME": "._checkpoint_files",
    "SAFE_WEIGHTS_INDEX_NAME": "._checkpoint_files",
    "SAFE_WEIGHTS_NAME": "._checkpoint_files",
    "SAFE_WEIGHTS_PATTERN_NAME": "._checkpoint_files",
    "WEIGHTS_INDEX_NAME": "._checkpoint_files",
    "WEIGHTS_NAME": "._checkpoint_files",
    "WEIGHTS_PATTERN_NAME": "._checkpoint_files",
    "load_state_dict": "._checkpoint_files",
    "CheckpointKeysError": "._checkpoint_io",
    "LoadReport": "._checkpoint_io",
    "load_checkpoint_in_model": "._checkpoint_io",
    "check_device_map": "._device_map_use",
    "clean_device_map": "._device_map",
    "infer_auto_device_map": "._device_map",
    "mapped_device": "._device_map_use",
    "DeviceMapError": "._devices",
    "cpu_offload": "._dispatch_model",
    "cpu_offload_with_hook": "._dispatch_model",
    "disk_offload": "._dispatch_model",
    "dispatch_model": "._dispatch_model",
    "load_checkpoint_and_dispatch": "._dispatch_model",
    "MemoryEstimate": "._estimate",
    "estimate_memory": "._estimate",
    "estimate_memory_from_config": "._estimate",
    "format_memory_table": "._estimate",
    "AlignDevicesHook": "._align_devices",
    "CpuOffload": "._hooks",
    "ModelHook": "._hooks",
    "SequentialHook": "._hooks",
    "UserCpuOffloadHook": "._hooks",
    "add_hook_to_module": "._hooks",
    "attach_align_device_hook": "._align_devices",
    "attach_align_device_hook_on_blocks": "._align_devices",
    "attach_execution_device_hook": "._align_devices",
    "remove_hook_from_module": "._hooks",
    "remove_hook_from_submodules": "._hooks",
    "init_empty_weights": "._init_empty",
    "init_on_device": "._init_empty",
    "SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING": "._layerwise_casting",
    "LayerwiseCastingHook": "._layerwise_casting",
    "attach_layerwise_casting_hooks": "._layerwise_casting",
    "OffloadedFileChangedError": "._file_guard",
    "OffloadedWeightsLoader": "._offload",
    "PrefixedDataset": "._offload",
    "extract_submodules_state_dict": "._offload",
    "load_offloaded_weight": "._offload",
    "load_offloaded_weights": "._offload",
    "offload_state_dict": "._offload",
    "offload_weight": "._offload",
    "save_offload_index": "._offload",
    "OffloadStorage": "._offload_storage",
    "StoredWeight": "._offload_storage",
    "register_offload_storage": "._offload_storage",
    "align_module_device": "._offload_access",
    "get_module_size_with_ties": "._offload_access",
    "get_state_dict_from_offload": "._offload_access",
    "get_state_dict_offloaded_model": "._offload_access",
    "has_offloaded_params": "._offload_access",
    "CustomDtype": "._placement_helpers",
    "check_tied_parameters_in_config": "._placement_helpers",
    "check_tied_parameters_on_same_device": "._placement_helpers",
    "fallback_allocate": "._placement_helpers",
    "get_module_leaves": "._placement_helpers",
    "Prefetcher": "._prefetch",
    "attach_prefetcher": "._prefetch",
    "PathOutsideCheckpointError": "._contained",
    "UntrustedPickleError": "._safe_pickle",
    "read_dcp_metadata_safely": "._safe_pickle",
    "safe_dcp_load": "._safe_pickle",
    "safe_torch_load": "._safe_pickle",
    "CorruptSafetensorsError": "._safetensors_io",
    "SafetensorsFile": "._safetensors_io",
    "write_safetensors": "._safetensors_io",
    "shard_checkpoint": "._sharding",
    "calculate_maximum_sizes": "._sizes",
    "compute_module_sizes": "._sizes",
    "compute_module_total_buffer_size": "._sizes",
    "convert_bytes": "._sizes",
    "convert_file_size_to_int": "._size_text",
    "dtype_byte_size": "._sizes",
    "get_balanced_memory": "._memory_budget",
    "get_max_layer_size": "._sizes",
    "get_max_memory": "._memory_budget",
    "get_non_persistent_buffers": "._sizes",
    "named_module_tensors": "._sizes",
    "clean_state_dict_for_safetensors": "._state_dict_tools",
    "get_parameter_device": "._state_dict_tools",
    "check_device_same": "._tensors",
    "find_tied_parameters": "._tensors",
    "id_tensor_storage": "._tensors",
    "retie_parameters": "._tensors",
    "set_module_tensor_to_device": "._tensors",
    "TIED_ALIASES_KEY": "._weights_io",
    "default_threads": "._weights_io",
    "find_tied_storages": "._weights_io",
    "load_safetensors_into": "._weights_io",
    "read_tied_aliases": "._weights_io",
    "save_safetensors_file": "._weights_io",
    "supports_in_place_load": "._weights_io",
    "tensor_view_key": "._weights_io",
}

__version__ = _version("accel-bigmodel")

__all__ = ["__version__", *sorted(_EXPORTS)]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_bigmodel' has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))

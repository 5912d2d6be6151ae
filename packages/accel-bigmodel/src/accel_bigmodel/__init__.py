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

__all__ = [
    "check_device_same",
    "convert_bytes",
    "id_tensor_storage",
    "align_module_device",
    "get_module_size_with_ties",
    "get_state_dict_from_offload",
    "get_state_dict_offloaded_model",
    "has_offloaded_params",
    "compute_module_total_buffer_size",
    "get_non_persistent_buffers",
    "SAFE_WEIGHTS_INDEX_NAME",
    "SAFE_WEIGHTS_NAME",
    "WEIGHTS_INDEX_NAME",
    "WEIGHTS_NAME",
    "AlignDevicesHook",
    "CheckpointKeysError",
    "CorruptSafetensorsError",
    "CpuOffload",
    "DeviceMapError",
    "LoadReport",
    "MemoryEstimate",
    "ModelHook",
    "OffloadedFileChangedError",
    "OffloadedWeightsLoader",
    "PathOutsideCheckpointError",
    "PrefixedDataset",
    "SequentialHook",
    "UntrustedPickleError",
    "UserCpuOffloadHook",
    "__version__",
    "add_hook_to_module",
    "attach_align_device_hook",
    "attach_align_device_hook_on_blocks",
    "attach_execution_device_hook",
    "calculate_maximum_sizes",
    "check_device_map",
    "clean_device_map",
    "compute_module_sizes",
    "convert_file_size_to_int",
    "cpu_offload",
    "cpu_offload_with_hook",
    "disk_offload",
    "dispatch_model",
    "dtype_byte_size",
    "estimate_memory",
    "estimate_memory_from_config",
    "extract_submodules_state_dict",
    "find_tied_parameters",
    "format_memory_table",
    "get_balanced_memory",
    "get_max_layer_size",
    "get_max_memory",
    "infer_auto_device_map",
    "init_empty_weights",
    "init_on_device",
    "load_checkpoint_and_dispatch",
    "load_checkpoint_in_model",
    "load_offloaded_weight",
    "load_offloaded_weights",
    "load_state_dict",
    "mapped_device",
    "named_module_tensors",
    "offload_state_dict",
    "offload_weight",
    "read_dcp_metadata_safely",
    "remove_hook_from_module",
    "remove_hook_from_submodules",
    "retie_parameters",
    "safe_dcp_load",
    "safe_torch_load",
    "save_offload_index",
    "set_module_tensor_to_device",
    "shard_checkpoint",
    "SafetensorsFile",
    "write_safetensors",
    "SAFE_MODEL_NAME",
    "SAFE_WEIGHTS_PATTERN_NAME",
    "WEIGHTS_PATTERN_NAME",
    "CustomDtype",
    "check_tied_parameters_in_config",
    "check_tied_parameters_on_same_device",
    "clean_state_dict_for_safetensors",
    "fallback_allocate",
    "get_module_leaves",
    "get_parameter_device",
    "SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING",
    "LayerwiseCastingHook",
    "attach_layerwise_casting_hooks",
    "TIED_ALIASES_KEY",
    "default_threads",
    "find_tied_storages",
    "load_safetensors_into",
    "read_tied_aliases",
    "save_safetensors_file",
    "supports_in_place_load",
    "tensor_view_key",
    "Prefetcher",
    "attach_prefetcher",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'accel_bigmodel' has no attribute {name!r}")
    value = getattr(_import_module(module, __name__), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_EXPORTS))


if TYPE_CHECKING:
    from ._align_devices import (
        AlignDevicesHook,
        attach_align_device_hook,
        attach_align_device_hook_on_blocks,
        attach_execution_device_hook,
    )
    from ._checkpoint_files import (
        SAFE_MODEL_NAME,
        SAFE_WEIGHTS_INDEX_NAME,
        SAFE_WEIGHTS_NAME,
        SAFE_WEIGHTS_PATTERN_NAME,
        WEIGHTS_INDEX_NAME,
        WEIGHTS_NAME,
        WEIGHTS_PATTERN_NAME,
        load_state_dict,
    )
    from ._checkpoint_io import CheckpointKeysError, LoadReport, load_checkpoint_in_model
    from ._contained import PathOutsideCheckpointError
    from ._device_map import clean_device_map, infer_auto_device_map
    from ._device_map_use import check_device_map, mapped_device
    from ._devices import DeviceMapError
    from ._dispatch_model import (
        cpu_offload,
        cpu_offload_with_hook,
        disk_offload,
        dispatch_model,
        load_checkpoint_and_dispatch,
    )
    from ._estimate import (
        MemoryEstimate,
        estimate_memory,
        estimate_memory_from_config,
        format_memory_table,
    )
    from ._file_guard import OffloadedFileChangedError
    from ._hooks import (
        CpuOffload,
        ModelHook,
        SequentialHook,
        UserCpuOffloadHook,
        add_hook_to_module,
        remove_hook_from_module,
        remove_hook_from_submodules,
    )
    from ._init_empty import init_empty_weights, init_on_device
    from ._layerwise_casting import (
        SUPPORTED_PYTORCH_LAYERS_FOR_UPCASTING,
        LayerwiseCastingHook,
        attach_layerwise_casting_hooks,
    )
    from ._memory_budget import get_balanced_memory, get_max_memory
    from ._offload import (
        OffloadedWeightsLoader,
        PrefixedDataset,
        extract_submodules_state_dict,
        load_offloaded_weight,
        load_offloaded_weights,
        offload_state_dict,
        offload_weight,
        save_offload_index,
    )
    from ._offload_access import (
        align_module_device,
        get_module_size_with_ties,
        get_state_dict_from_offload,
        get_state_dict_offloaded_model,
        has_offloaded_params,
    )
    from ._placement_helpers import (
        CustomDtype,
        check_tied_parameters_in_config,
        check_tied_parameters_on_same_device,
        fallback_allocate,
        get_module_leaves,
    )
    from ._prefetch import Prefetcher, attach_prefetcher
    from ._safe_pickle import (
        UntrustedPickleError,
        read_dcp_metadata_safely,
        safe_dcp_load,
        safe_torch_load,
    )
    from ._safetensors_io import CorruptSafetensorsError, SafetensorsFile, write_safetensors
    from ._sharding import shard_checkpoint
    from ._size_text import convert_file_size_to_int
    from ._sizes import (
        calculate_maximum_sizes,
        compute_module_sizes,
        compute_module_total_buffer_size,
        convert_bytes,
        dtype_byte_size,
        get_max_layer_size,
        get_non_persistent_buffers,
        named_module_tensors,
    )
    from ._state_dict_tools import clean_state_dict_for_safetensors, get_parameter_device
    from ._tensors import (
        check_device_same,
        find_tied_parameters,
        id_tensor_storage,
        retie_parameters,
        set_module_tensor_to_device,
    )
    from ._weights_io import (
        TIED_ALIASES_KEY,
        default_threads,
        find_tied_storages,
        load_safetensors_into,
        read_tied_aliases,
        save_safetensors_file,
        supports_in_place_load,
        tensor_view_key,
    )

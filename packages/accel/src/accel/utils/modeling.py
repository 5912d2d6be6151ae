"""``accel.utils.modeling``: the names of the reference's ``accelerate.utils.modeling``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.modeling"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        CustomDtype,
        align_module_device,
        calculate_maximum_sizes,
        check_device_map,
        check_device_same,
        check_tied_parameters_in_config,
        check_tied_parameters_on_same_device,
        clean_device_map,
        compute_module_sizes,
        compute_module_total_buffer_size,
        convert_file_size_to_int,
        dtype_byte_size,
        fallback_allocate,
        find_tied_parameters,
        get_balanced_memory,
        get_max_layer_size,
        get_max_memory,
        get_module_leaves,
        get_module_size_with_ties,
        get_non_persistent_buffers,
        get_state_dict_from_offload,
        get_state_dict_offloaded_model,
        has_offloaded_params,
        id_tensor_storage,
        infer_auto_device_map,
        load_checkpoint_in_model,
        load_offloaded_weight,
        load_offloaded_weights,
        load_state_dict,
        named_module_tensors,
        offload_weight,
        retie_parameters,
        save_offload_index,
        set_module_tensor_to_device,
    )
    from accel_precision import get_grad_scaler, get_mixed_precision_context_manager
    from accel_state import (
        AcceleratorState,
        AutocastKwargs,
        DistributedType,
        clear_device_cache,
        is_hpu_available,
        is_mlu_available,
        is_mps_available,
        is_musa_available,
        is_npu_available,
        is_peft_available,
        is_sdaa_available,
        is_torch_version,
        is_torch_xla_available,
        is_tqdm_available,
        is_xpu_available,
        tqdm,
    )

    from accel._checkpoint._state_files import (
        SAFE_WEIGHTS_NAME,
        WEIGHTS_INDEX_NAME,
        WEIGHTS_NAME,
    )
    from accel._facade._model_probes import is_peft_model

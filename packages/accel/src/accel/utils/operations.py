"""``accel.utils.operations``: the names of the reference's ``accelerate.utils.operations``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.operations"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_collectives import (
        TENSOR_INT_TO_DTYPE,
        TENSOR_TYPE_TO_INT,
        CannotPadNestedTensorWarning,
        DistributedOperationException,
        TensorInformation,
        broadcast,
        broadcast_object_list,
        chained_operation,
        concatenate,
        convert_to_fp32,
        copy_tensor_to_devices,
        find_batch_size,
        find_device,
        gather,
        gather_object,
        gather_tensor_shape,
        get_data_structure,
        get_shape,
        honor_type,
        ignorant_find_batch_size,
        initialize_tensors,
        is_namedtuple,
        is_tensor_information,
        is_torch_tensor,
        is_torch_xpu_tensor,
        listify,
        pad_across_processes,
        pad_input_tensors,
        recursively_apply,
        reduce,
        send_to_device,
        slice_tensors,
        verify_operation,
    )
    from accel_precision import (
        ConvertOutputsToFp32,
        convert_outputs_to_fp32,
    )
    from accel_state import (
        TORCH_DISTRIBUTED_OPERATION_TYPES,
        AcceleratorState,
        DistributedType,
        PartialState,
        is_npu_available,
        is_torch_distributed_available,
        is_torch_version,
        is_torch_xla_available,
    )

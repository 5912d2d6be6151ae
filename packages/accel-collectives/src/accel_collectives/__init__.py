"""Collective operations on nested tensors (gather, reduce, broadcast, pad_across_processes, ...).

Every operation takes a tensor or a nested list/tuple/dict (namedtuples and ``Mapping``
subclasses included) of tensors, works on one process as well as on many, and returns the same
structure. Set ``ACCEL_DEBUG_MODE=1`` to check, before each collective, that every process
passes compatible data.
"""

from importlib.metadata import version as _version

from ._averaging import average_parameters
from ._checks import CannotPadNestedTensorWarning, DistributedOperationException
from ._decorators import chained_operation, verify_operation
from ._nested import (
    TensorInformation,
    concatenate,
    convert_to_fp32,
    find_batch_size,
    find_device,
    get_data_structure,
    get_shape,
    honor_type,
    ignorant_find_batch_size,
    initialize_tensors,
    is_namedtuple,
    is_tensor_information,
    is_torch_tensor,
    listify,
    pad_input_tensors,
    recursively_apply,
    send_to_device,
    slice_tensors,
)
from ._ops import (
    broadcast,
    broadcast_object_list,
    copy_tensor_to_devices,
    gather,
    gather_object,
    reduce,
)
from ._padding import pad_across_processes
from ._shapes import (
    TENSOR_INT_TO_DTYPE,
    TENSOR_TYPE_TO_INT,
    gather_tensor_shape,
    is_torch_xpu_tensor,
)

__version__ = _version("accel-collectives")

__all__ = [
    "CannotPadNestedTensorWarning",
    "DistributedOperationException",
    "TensorInformation",
    "__version__",
    "average_parameters",
    "broadcast",
    "broadcast_object_list",
    "concatenate",
    "convert_to_fp32",
    "copy_tensor_to_devices",
    "find_batch_size",
    "find_device",
    "gather",
    "gather_object",
    "get_data_structure",
    "get_shape",
    "honor_type",
    "ignorant_find_batch_size",
    "initialize_tensors",
    "is_namedtuple",
    "is_tensor_information",
    "is_torch_tensor",
    "listify",
    "pad_across_processes",
    "pad_input_tensors",
    "recursively_apply",
    "reduce",
    "send_to_device",
    "slice_tensors",
    "TENSOR_INT_TO_DTYPE",
    "TENSOR_TYPE_TO_INT",
    "chained_operation",
    "gather_tensor_shape",
    "is_torch_xpu_tensor",
    "verify_operation",
]

"""Collective operations on nested tensors (gather, reduce, broadcast, pad_across_processes, ...).

Every operation takes a tensor or a nested list/tuple/dict (namedtuples and ``Mapping``
subclasses included) of tensors, works on one process as well as on many, and returns the same
structure. Set ``ACCEL_DEBUG_MODE=1`` to check, before each collective, that every process
passes compatible data.
"""

from __future__ import annotations

from accel_state.lazy import lazy_module as _lazy_module

# Public name -> the private module that defines it, loaded on first use: the one list of
# this package's names (__all__ and the type stub beside this file are made from it).
_EXPORTS = {
    "average_parameters": "._averaging",
    "CannotPadNestedTensorWarning": "._checks",
    "DistributedOperationException": "._checks",
    "chained_operation": "._decorators",
    "verify_operation": "._decorators",
    "TensorInformation": "._nested",
    "concatenate": "._nested",
    "convert_to_fp32": "._nested",
    "find_batch_size": "._nested",
    "find_device": "._nested",
    "get_data_structure": "._nested",
    "get_shape": "._nested",
    "honor_type": "._nested",
    "ignorant_find_batch_size": "._nested",
    "initialize_tensors": "._nested",
    "is_namedtuple": "._nested",
    "is_tensor_information": "._nested",
    "is_torch_tensor": "._nested",
    "listify": "._nested",
    "pad_input_tensors": "._nested",
    "recursively_apply": "._nested",
    "send_to_device": "._nested",
    "slice_tensors": "._nested",
    "broadcast": "._ops",
    "broadcast_object_list": "._ops",
    "copy_tensor_to_devices": "._ops",
    "gather": "._ops",
    "gather_object": "._ops",
    "reduce": "._ops",
    "pad_across_processes": "._padding",
    "TENSOR_INT_TO_DTYPE": "._shapes",
    "TENSOR_TYPE_TO_INT": "._shapes",
    "gather_tensor_shape": "._shapes",
    "is_torch_xpu_tensor": "._shapes",
}

# Read from the installed metadata on first access.
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

__getattr__, __dir__ = _lazy_module(globals(), _EXPORTS, distribution="accel-collectives")

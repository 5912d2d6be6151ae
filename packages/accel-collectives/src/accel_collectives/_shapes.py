"""Sending a tensor's shape and dtype from the one process that has it to every process."""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from ._ops import _get_state

TENSOR_TYPE_TO_INT: dict[torch.dtype, int] = {
    torch.float32: 1,
    torch.float64: 2,
    torch.float16: 3,
    torch.bfloat16: 4,
    torch.uint8: 5,
    torch.int8: 6,
    torch.int16: 7,
    torch.int32: 8,
    torch.int64: 9,
    torch.bool: 10,
}
"""The dtypes whose code ``gather_tensor_shape`` sends, and their codes (never 0)."""

TENSOR_INT_TO_DTYPE: dict[int, torch.dtype] = {
    code: dtype for dtype, code in TENSOR_TYPE_TO_INT.items()
}
"""The inverse of ``TENSOR_TYPE_TO_INT``."""

_MAX_DIMS = 64


def is_torch_xpu_tensor(tensor: Any) -> bool:
    """Whether ``tensor`` is a tensor on an Intel XPU device."""
    return isinstance(tensor, torch.Tensor) and tensor.device.type == "xpu"


def _dtype_code(tensor: torch.Tensor) -> int:
    code = TENSOR_TYPE_TO_INT.get(tensor.dtype)
    if code is None:
        raise ValueError(
            f"gather_tensor_shape sends only the dtypes {list(TENSOR_TYPE_TO_INT)}; got "
            f"{tensor.dtype}. Cast the tensor to one of them first."
        )
    if tensor.dim() > _MAX_DIMS:
        raise ValueError(
            f"gather_tensor_shape sends at most {_MAX_DIMS} dimensions; got a tensor of "
            f"{tensor.dim()}. Reshape it first."
        )
    return code


def gather_tensor_shape(tensor: torch.Tensor | None) -> tuple[torch.Tensor, int]:
    """Give every process the shape and dtype code of a tensor only one process holds.

    Every process must call it; exactly one passes the tensor, the others ``None``. Sizes of 0
    are sent as they are.

    Args:
        tensor: The tensor on the process that has it, ``None`` elsewhere.

    Returns:
        ``(shape, dtype_code)``: the shape as a 1-D ``int64`` tensor and the dtype's code in
        ``TENSOR_TYPE_TO_INT`` (``TENSOR_INT_TO_DTYPE[code]`` gives the dtype back).

    Raises:
        ValueError: no process or several processes passed a tensor (on every process), or
            the dtype has no code.
    """
    state = _get_state()
    code = _dtype_code(tensor) if tensor is not None else 0
    if state.num_processes < 2 or not dist.is_initialized():
        if tensor is None:
            raise ValueError(
                "gather_tensor_shape needs the tensor on one process; this single process "
                "passed None. Pass the tensor."
            )
        return torch.tensor(list(tensor.shape), dtype=torch.int64), code
    packed = torch.zeros(3 + _MAX_DIMS, dtype=torch.int64, device=state.device)
    if tensor is not None:
        packed[0], packed[1], packed[2] = 1, code, tensor.dim()
        packed[3 : 3 + tensor.dim()] = torch.tensor(list(tensor.shape), dtype=torch.int64)
    dist.all_reduce(packed)
    holders = int(packed[0])
    if holders != 1:
        raise ValueError(
            "gather_tensor_shape needs the tensor on exactly one process and None on the "
            f"others; {holders} of {state.num_processes} processes passed a tensor. Pass it on "
            "one process only."
        )
    ndim = int(packed[2])
    return packed[3 : 3 + ndim].cpu().clone(), int(packed[1])

"""``pad_across_processes``: the tensors of a structure padded to the largest size any process
has, with the sizes of the whole structure exchanged in one all-gather."""

from __future__ import annotations

import warnings
from typing import Any

import torch

from ._checks import CannotPadNestedTensorWarning, verify_operation
from ._nested import iter_leaves, recursively_apply
from ._ops import _gather_one, _get_state


def _pad_dim(tensor: torch.Tensor, dim: int) -> int | None:
    """Return ``dim`` as a non-negative index of ``tensor``, or None if it cannot be padded."""
    if tensor.is_nested:
        return None
    ndim = tensor.ndim
    d = dim + ndim if dim < 0 else dim
    return d if 0 <= d < ndim else None


def _warn_if_nested(tensor: torch.Tensor) -> None:
    if tensor.is_nested:
        warnings.warn(
            "pad_across_processes cannot pad a nested tensor; it is returned unchanged. "
            "Pad its components before nesting them.",
            CannotPadNestedTensorWarning,
            stacklevel=3,
        )


def _pad_to(
    tensor: torch.Tensor, dim: int, size: int, pad_index: Any, pad_first: bool
) -> torch.Tensor:
    current = tensor.shape[dim]
    if current >= size:
        return tensor
    shape = list(tensor.shape)
    shape[dim] = size
    out = tensor.new_zeros(shape) if pad_index == 0 else tensor.new_full(shape, pad_index)
    out.narrow(dim, size - current if pad_first else 0, current).copy_(tensor)
    return out


def pad_across_processes(
    tensor: Any, dim: int = 0, pad_index: Any = 0, pad_first: bool = False
) -> Any:
    """Pad the tensors of a nested list/tuple/dict to the same size in ``dim`` on every process.

    Each tensor is padded with ``pad_index`` up to the largest size any process has for it in
    ``dim``, so that the results can be gathered. The sizes of all the tensors of the structure
    are exchanged in a single collective. Tensors with fewer than ``dim + 1`` dimensions, and
    tensors already at the largest size, are returned unchanged.

    Args:
        tensor: A tensor or a nested list/tuple/dict of tensors, with the same structure on
            every process.
        dim: The dimension to pad.
        pad_index: The value of the padding.
        pad_first: Pad at the beginning instead of the end.

    Returns:
        The same structure holding the padded tensors.

    Raises:
        DistributedOperationException: in debug mode, if the processes pass different
            structures, dtypes, or shapes that differ outside ``dim``.

    Example:
        >>> pad_across_processes(torch.arange(state.process_index + 1)).shape  # 2 processes
        torch.Size([2])
    """
    state = _get_state()
    if state.num_processes == 1:
        # Nothing to pad against; nested tensors still warn, as on several processes.
        for _, leaf in iter_leaves(tensor):
            if isinstance(leaf, torch.Tensor):
                _warn_if_nested(leaf)
        return tensor
    if state.debug:
        verify_operation(
            "pad_across_processes",
            tensor,
            free_dim=dim,
            rule=f"every process must pass the same structure of tensors whose shapes differ "
            f"only in dim {dim}",
            fix="Make the other dimensions agree, or pad along the dimension that differs "
            "(dim=...).",
        )
    if isinstance(tensor, torch.Tensor):
        # The common case: one tensor, one size to exchange.
        d = _pad_dim(tensor, dim)
        if d is None:
            _warn_if_nested(tensor)
            return tensor
        everyone = _gather_one(torch.tensor([tensor.shape[d]], dtype=torch.int64), state)
        return _pad_to(tensor, d, max(everyone.tolist()), pad_index, pad_first)
    sizes: list[int] = []
    for _, leaf in iter_leaves(tensor):
        if isinstance(leaf, torch.Tensor):
            d = _pad_dim(leaf, dim)
            if d is not None:
                sizes.append(leaf.shape[d])
            else:
                _warn_if_nested(leaf)
    if not sizes:
        return tensor
    everyone = _gather_one(torch.tensor(sizes, dtype=torch.int64), state)
    targets = iter(everyone.view(state.num_processes, -1).amax(dim=0).tolist())

    def pad_one(leaf: torch.Tensor) -> torch.Tensor:
        d = _pad_dim(leaf, dim)
        if d is None:
            return leaf
        return _pad_to(leaf, d, next(targets), pad_index, pad_first)

    return recursively_apply(pad_one, tensor)

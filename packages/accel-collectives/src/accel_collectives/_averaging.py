"""``average_parameters``: replace tensors by their mean over the processes, in place.

Used by local SGD, which trains each process alone for a few steps and then averages the
weights. The tensors are packed into one flat buffer per dtype and device, so a model costs
one all-reduce per dtype instead of one per parameter.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch
import torch.distributed as dist


def average_parameters(tensors: Iterable[torch.Tensor]) -> None:
    """Set every tensor to its element-wise mean over all processes, in place.

    Each process passes the same tensors (same order, shapes and dtypes); the mean is the sum
    over processes divided by their number. On one process, or without an initialised process
    group, nothing changes.

    Args:
        tensors: Floating-point tensors, e.g. ``model.parameters()``.

    Raises:
        TypeError: if a tensor is not floating point (its mean would not fit its dtype).
    """
    tensors = list(tensors)
    for tensor in tensors:
        if not torch.is_floating_point(tensor):
            raise TypeError(
                "average_parameters averages floating-point tensors; got one of dtype "
                f"{tensor.dtype} and shape {tuple(tensor.shape)}. Pass only floating-point "
                "parameters (filter with torch.is_floating_point)."
            )
    if not (dist.is_available() and dist.is_initialized()) or dist.get_world_size() == 1:
        return
    world = dist.get_world_size()
    buckets: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for tensor in tensors:
        buckets.setdefault((tensor.dtype, tensor.device), []).append(tensor)
    with torch.no_grad():
        for members in buckets.values():
            flat = torch.cat([t.detach().reshape(-1) for t in members])
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            flat.div_(world)
            offset = 0
            for tensor in members:
                count = tensor.numel()
                tensor.copy_(flat[offset : offset + count].view_as(tensor))
                offset += count

"""Operations on nested batches used by the loaders: device moves, slicing, concatenation and
the few collectives of the dispatcher and of ``gather_for_metrics``.

Batches are nests of tuples, lists, dicts and leaves. A *per-sample* list (the collated form of
strings, for example) is sliced and concatenated like a tensor along its first axis.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
import torch.distributed as dist


def _is_namedtuple(data: Any) -> bool:
    return isinstance(data, tuple) and hasattr(data, "_fields")


def _rebuild(data: Any, items: list[Any]) -> Any:
    if _is_namedtuple(data):
        return type(data)(*items)
    return type(data)(items)


def map_tensors(fn: Callable[[torch.Tensor], Any], data: Any) -> Any:
    """Apply ``fn`` to every tensor of a nest; other leaves are kept."""
    if isinstance(data, torch.Tensor):
        return fn(data)
    if isinstance(data, (list, tuple)):
        return _rebuild(data, [map_tensors(fn, d) for d in data])
    if isinstance(data, Mapping):
        return type(data)({k: map_tensors(fn, v) for k, v in data.items()})
    return data


def send_to_device(data: Any, device: torch.device | str, non_blocking: bool = False) -> Any:
    """Move every tensor of a nest to ``device`` (objects with ``.to`` are moved too)."""

    def move(t: Any) -> Any:
        return t.to(device, non_blocking=non_blocking)

    if hasattr(data, "to") and not isinstance(data, (torch.Tensor, list, tuple, Mapping)):
        try:
            return data.to(device, non_blocking=non_blocking)
        except TypeError:
            return data.to(device)
    return map_tensors(move, data)


def _is_sample_list(data: Any) -> bool:
    # A list whose items are not containers: the collated form of per-sample objects.
    return isinstance(data, list) and not any(
        isinstance(d, (torch.Tensor, list, tuple, Mapping)) for d in data
    )


def find_batch_size(data: Any) -> int | None:
    """First-axis length of the first tensor (or per-sample list) of a nest, None if none."""
    if isinstance(data, torch.Tensor):
        return int(data.shape[0]) if data.ndim > 0 else None
    if _is_sample_list(data):
        return len(data)
    if isinstance(data, (list, tuple)):
        for d in data:
            size = find_batch_size(d)
            if size is not None:
                return size
        return None
    if isinstance(data, Mapping):
        for d in data.values():
            size = find_batch_size(d)
            if size is not None:
                return size
    return None


def slice_batch(data: Any, index: slice) -> Any:
    """Slice every tensor (and per-sample list) of a nest along its first axis."""
    if isinstance(data, torch.Tensor):
        return data[index] if data.ndim > 0 else data
    if _is_sample_list(data):
        return data[index]
    if isinstance(data, (list, tuple)):
        return _rebuild(data, [slice_batch(d, index) for d in data])
    if isinstance(data, Mapping):
        return type(data)({k: slice_batch(v, index) for k, v in data.items()})
    return data


def concat_batches(batches: list[Any]) -> Any:
    """Concatenate nests of the same structure along the first axis."""
    first = batches[0]
    if isinstance(first, torch.Tensor):
        if first.ndim == 0:
            return torch.stack(batches)
        return torch.cat(batches, dim=0)
    if _is_sample_list(first):
        return [x for b in batches for x in b]
    if isinstance(first, (list, tuple)):
        return _rebuild(first, [concat_batches([b[i] for b in batches]) for i in range(len(first))])
    if isinstance(first, Mapping):
        return type(first)({k: concat_batches([b[k] for b in batches]) for k in first})
    return first


# ------------------------------------------------------------------------------ collectives
def _world() -> tuple[int, int]:
    if dist.is_available() and dist.is_initialized():
        return dist.get_world_size(), dist.get_rank()
    return 1, 0


def gather(data: Any) -> Any:
    """All-gather every tensor of a nest and concatenate along the first axis, in rank order."""
    world, _ = _world()
    if world == 1:
        return data

    def gather_one(tensor: torch.Tensor) -> torch.Tensor:
        if tensor.ndim == 0:
            tensor = tensor[None]
        tensor = tensor.contiguous()
        parts = [torch.empty_like(tensor) for _ in range(world)]
        dist.all_gather(parts, tensor)
        return torch.cat(parts, dim=0)

    return map_tensors(gather_one, data)


def gather_object(obj: Any) -> list[Any]:
    """All-gather a per-process list of objects into one flat list, in rank order."""
    world, _ = _world()
    if world == 1:
        return list(obj)
    out: list[Any] = [None] * world
    dist.all_gather_object(out, obj)
    return [item for part in out for item in part]


def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Return ``obj`` of process ``src`` on every process."""
    world, _ = _world()
    if world == 1:
        return obj
    holder = [obj]
    dist.broadcast_object_list(holder, src=src)
    return holder[0]


def broadcast_tensors(data: Any, src: int = 0) -> Any:
    """Broadcast a nest whose structure is already known everywhere (tensors in place)."""
    world, _ = _world()
    if world == 1:
        return data

    def bcast(tensor: torch.Tensor) -> torch.Tensor:
        tensor = tensor.contiguous()
        dist.broadcast(tensor, src=src)
        return tensor

    return map_tensors(bcast, data)

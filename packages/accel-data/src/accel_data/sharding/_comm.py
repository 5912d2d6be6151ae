"""Operations on nested batches used by the loaders: slicing and concatenation along the batch
axis, and the broadcasts of the dispatcher (built on ``accel_collectives``).

Batches are nests of tuples, lists, dicts and leaves. A *per-sample* list (the collated form of
strings, for example) is sliced and concatenated like a tensor along its first axis, which is
why these helpers exist next to ``accel_collectives.slice_tensors`` / ``concatenate`` (tensors
only).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import torch
from accel_collectives import broadcast, broadcast_object_list


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
        return type(data)({k: map_tensors(fn, v) for k, v in data.items()})  # type: ignore[call-arg]
    return data


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
        return type(data)({k: slice_batch(v, index) for k, v in data.items()})  # type: ignore[call-arg]
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
        return type(first)({k: concat_batches([b[k] for b in batches]) for k in first})  # type: ignore[call-arg]
    return first


# ------------------------------------------------------------------------------ collectives
def broadcast_object(obj: Any, src: int = 0) -> Any:
    """Return ``obj`` of process ``src`` on every process."""
    return broadcast_object_list([obj], from_process=src)[0]


def broadcast_tensors(data: Any, src: int = 0) -> Any:
    """Broadcast the tensors of a nest whose structure every process already holds.

    Non-tensor leaves (per-sample lists of strings, for example) are left as they are.
    """
    leaves: list[torch.Tensor] = []

    def collect(tensor: torch.Tensor) -> torch.Tensor:
        leaves.append(tensor)
        return tensor

    map_tensors(collect, data)
    if not leaves:
        return data
    received = iter(broadcast(leaves, from_process=src))
    return map_tensors(lambda _: next(received), data)

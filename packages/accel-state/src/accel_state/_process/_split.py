"""Splitting inputs between processes (``split_between_processes``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch


def _length(inputs: Any) -> int:
    if isinstance(inputs, Mapping):
        lengths = {key: len(value) for key, value in inputs.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(
                "split_between_processes needs every value of a dict to have the same length; "
                f"got lengths {lengths}. Pad or trim the values to one length first."
            )
        return next(iter(lengths.values()), 0)
    if isinstance(inputs, (list, tuple, torch.Tensor)) or _is_selectable(inputs):
        return len(inputs)
    raise TypeError(
        "split_between_processes accepts a list, tuple, dict of equal-length values, a tensor "
        f"or a datasets.Dataset; got {type(inputs).__name__}. Wrap single items in a list."
    )


def _is_selectable(inputs: Any) -> bool:
    """Whether ``inputs`` is a sized table with ``select(indices)`` (a ``datasets.Dataset``)."""
    return hasattr(inputs, "__len__") and callable(getattr(inputs, "select", None))


def split_bounds(length: int, num_processes: int, process_index: int) -> tuple[int, int, int]:
    """Return ``(start, end, padded_length)`` of this process's contiguous share.

    The first ``length % num_processes`` processes get one more item than the others, so
    3 items over 2 processes give ``[0, 2)`` and ``[2, 3)``; every share padded to 2.
    """
    per_process, extras = divmod(length, num_processes)
    start = process_index * per_process + min(process_index, extras)
    end = start + per_process + (1 if process_index < extras else 0)
    padded = per_process + (1 if extras else 0)
    return start, end, padded


def _take(values: Any, start: int, end: int, padded: int, apply_padding: bool) -> Any:
    if isinstance(values, Mapping):
        taken = {k: _take(v, start, end, padded, apply_padding) for k, v in values.items()}
        return type(values)(taken)  # type: ignore[call-arg]
    if isinstance(values, torch.Tensor):
        piece = values[start:end]
        if apply_padding and len(piece) < padded and len(values) > 0:
            filler = values[-1:]
            repeats = [padded - len(piece)] + [1] * (values.dim() - 1)
            piece = torch.cat([piece, filler.repeat(*repeats)], dim=0)
        return piece
    if isinstance(values, (list, tuple)):
        items = list(values[start:end])
        if apply_padding and len(items) < padded and len(values) > 0:
            items = items + [values[-1]] * (padded - len(items))
        return type(values)(items) if isinstance(values, tuple) else items
    if _is_selectable(values):
        indices = list(range(min(start, len(values)), min(end, len(values))))
        if apply_padding and len(indices) < padded and len(values) > 0:
            indices += [len(values) - 1] * (padded - len(indices))
        return values.select(indices)
    return values


def split_inputs(inputs: Any, num_processes: int, process_index: int, apply_padding: bool) -> Any:
    """Return this process's share of ``inputs`` (see ``PartialState.split_between_processes``)."""
    if num_processes == 1:
        return inputs
    start, end, padded = split_bounds(_length(inputs), num_processes, process_index)
    return _take(inputs, start, end, padded, apply_padding)

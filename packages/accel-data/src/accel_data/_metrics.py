"""``gather_for_metrics``: gather per-sample results and drop the samples repeated to even out
the last step."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import torch
from accel_collectives import gather, gather_object
from accel_state import GradientState

from ._comm import map_tensors


def _all_tensors(data: Any) -> bool:
    if isinstance(data, torch.Tensor):
        return True
    if isinstance(data, (list, tuple)):
        return len(data) > 0 and all(_all_tensors(d) for d in data)
    if isinstance(data, Mapping):
        return len(data) > 0 and all(_all_tensors(d) for d in data.values())
    return False


def _first_dims(data: Any) -> set[int]:
    sizes: set[int] = set()

    def note(tensor: torch.Tensor) -> torch.Tensor:
        sizes.add(int(tensor.shape[0]) if tensor.ndim else 1)
        return tensor

    map_tensors(note, data)
    return sizes


def _warn_unknown(size: int, expected: int) -> None:
    warnings.warn(
        f"gather_for_metrics drops the repeated samples of the last step only from per-sample "
        f"results; the gathered result has {size} rows but the last step held {expected} "
        "samples, so nothing was dropped. Gather one row per sample (e.g. predictions of "
        "shape [batch, ...]).",
        stacklevel=3,
    )


def gather_for_metrics(input_data: Any, use_gather_object: bool = False) -> Any:
    """Gather ``input_data`` from every process, without the samples repeated at the end.

    On the last batch of the active prepared loader, the processes that ran out of data were
    given samples from the start of the dataset so that every process had a full batch; those
    samples are dropped here, so the result holds every sample of the dataset exactly once over
    an epoch.

    Args:
        input_data: A tensor or a nest of tensors with one row per sample, or any picklable
            objects.
        use_gather_object: Gather with pickling: each process passes a list of per-sample
            objects and gets the flat list of all of them. Used as well whenever
            ``input_data`` holds something other than tensors.

    Returns:
        The gathered data: tensors concatenated along the first axis in process order, or a
        flat list of objects.
    """
    use_gather_object = use_gather_object or not _all_tensors(input_data)
    data = gather_object(input_data) if use_gather_object else gather(input_data)
    state = GradientState()
    if not state.end_of_dataloader:
        return data
    loader = state.active_dataloader
    if hasattr(loader, "_real_remainder"):
        remainder = int(loader._real_remainder)
        step_size = int(getattr(loader, "_last_step_size", -1))
    else:
        # A loader from elsewhere: its remainder counts the real samples of the last step when
        # positive, and 0 means the step is complete.
        remainder, step_size = state.remainder, -1
        if remainder == 0:
            return data
    if remainder < 0 or (step_size >= 0 and remainder >= step_size):
        return data
    if use_gather_object:
        if step_size >= 0 and len(data) != step_size:
            _warn_unknown(len(data), step_size)
            return data
        return data[:remainder]
    sizes = _first_dims(data)
    if step_size >= 0 and sizes != {step_size}:
        _warn_unknown(max(sizes) if sizes else 0, step_size)
        return data
    return map_tensors(lambda t: t[:remainder], data)

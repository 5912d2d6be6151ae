"""``gather_for_metrics``: gather per-sample results and drop the samples repeated to even out
the last step."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch
from accel_collectives import gather, gather_object
from accel_state import GradientState

from .sharding._comm import map_tensors


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
    keep = _rows_to_keep(data, use_gather_object, state)
    if keep < 0:
        return data
    if use_gather_object:
        return data[:keep]
    return map_tensors(lambda t: t[:keep] if t.ndim else t, data)


def _rows_to_keep(data: Any, gathered_objects: bool, state: GradientState) -> int:
    """How many leading rows of the last step's gathered ``data`` to keep (-1: all of them).

    A prepared loader knows the real samples of its last step and the size of that step once
    completed: a result with one row per sample of the step keeps exactly the real ones. Any
    other result (a per-batch value repeated to a fixed length, as transformers' ``Trainer``
    gathers its losses, or data of a loader from elsewhere) is cut to the loader's
    ``remainder`` when it is positive, the rule of the reference library.
    """
    loader = state.active_dataloader
    if hasattr(loader, "_real_remainder"):
        real = int(loader._real_remainder)
        step_size = int(getattr(loader, "_last_step_size", -1))
        rows = {len(data)} if gathered_objects else _first_dims(data)
        if real >= 0 and step_size >= 0 and rows == {step_size}:
            return real if real < step_size else -1
    remainder = int(state.remainder)
    return remainder if remainder > 0 else -1

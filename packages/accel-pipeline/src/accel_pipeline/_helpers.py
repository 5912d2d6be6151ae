"""The reference's pipeline building blocks: ``generate_device_map``, ``find_pippy_batch_size``,
``build_pipeline`` and ``pippy_forward``, on accel-pipeline's own tracing."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from accel_bigmodel import calculate_maximum_sizes, convert_bytes, infer_auto_device_map
from accel_collectives import copy_tensor_to_devices, ignorant_find_batch_size, pad_input_tensors
from accel_state import PartialState
from torch import nn

from ._trace import pipelining_api, trace_pipeline


def generate_device_map(
    model: nn.Module,
    num_processes: int = 1,
    no_split_module_classes: list[str] | None = None,
    max_memory: dict[Any, Any] | None = None,
) -> dict[str, Any]:
    """A device map spreading ``model`` over ``num_processes`` pipeline stages (devices
    ``0 .. num_processes - 1``), every module listed (not merged into its parent).

    Without ``max_memory``, each device gets an equal share of the model plus its largest
    layer, rounded up in its unit (``convert_bytes``) with 10% of headroom.

    Args:
        model: The model to place.
        num_processes: Number of stages; 1 places the model as ``infer_auto_device_map`` does.
        no_split_module_classes: Class names whose modules stay on one device.
        max_memory: Memory per device, instead of the equal shares.
    """
    if num_processes == 1:
        return infer_auto_device_map(
            model, no_split_module_classes=no_split_module_classes, clean_result=False
        )
    if max_memory is None:
        total, (largest, _) = calculate_maximum_sizes(model)
        amount, unit = convert_bytes((total + largest) / num_processes).split(" ")
        share = f"{math.ceil(float(amount)) * 1.1} {unit}"
        max_memory = dict.fromkeys(range(num_processes), share)
    return infer_auto_device_map(
        model,
        max_memory=max_memory,
        no_split_module_classes=no_split_module_classes,
        clean_result=False,
        check_devices=False,  # stage numbers, not devices of this machine
    )


def find_pippy_batch_size(
    args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None
) -> int | None:
    """The batch size of the first positional (then keyword) input that has one, or None."""
    for value in [*(args or ()), *(kwargs or {}).values()]:
        size = ignorant_find_batch_size(value)
        if size is not None:
            return size
    return None


def build_pipeline(
    model: nn.Module,
    split_points: Sequence[str],
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None,
    num_chunks: int,
) -> Any:
    """Cut ``model`` before each module of ``split_points`` and return this process's
    ``ScheduleGPipe`` (stage ``process_index``, ``num_chunks`` micro-batches per step).

    ``args`` / ``kwargs`` are the inputs of one micro-batch, used to trace the model.
    ``prepare_pippy`` does all of this (and finds split points, and frees the other stages'
    weights); this is the reference's lower-level step.

    Raises:
        ValueError: when the cut does not give one stage per process.
        accel_pipeline.PipelineTraceError: when the forward pass cannot be traced.
    """
    state = PartialState()
    pipe = trace_pipeline(model, list(split_points), tuple(args), kwargs)
    if pipe.num_stages != state.num_processes:
        raise ValueError(
            f"build_pipeline builds one stage per process; split points {list(split_points)} "
            f"gave {pipe.num_stages} stages for {state.num_processes} processes. Pass "
            f"{state.num_processes - 1} split points that the forward pass calls."
        )
    stage = pipe.build_stage(state.process_index, device=state.device)
    return pipelining_api().ScheduleGPipe(stage, n_microbatches=num_chunks)


def pippy_forward(
    forward: Callable[..., Any], num_chunks: int, gather_output: bool, *args: Any, **kwargs: Any
) -> Any:
    """Run one pipeline step: the first process feeds the inputs (padded so the batch splits
    into ``num_chunks`` micro-batches), the last one gets the output.

    Args:
        forward: The schedule's ``step`` (see ``build_pipeline``).
        num_chunks: Micro-batches per step.
        gather_output: Give the output to every process (else only the last has it).
        *args: The batch's positional inputs (read on the first process).
        **kwargs: Its keyword inputs.

    Returns:
        The output on the last process (every process with ``gather_output``), None elsewhere.

    Raises:
        ValueError: when no input of the first process has a batch dimension.
    """
    state = PartialState()
    if state.num_processes == 1:
        return forward(*args, **kwargs)
    output = None
    if state.process_index == 0:
        batch = find_pippy_batch_size(args, kwargs)
        if batch is None:
            raise ValueError(
                "pippy_forward splits the batch into micro-batches, so one input must be a "
                "tensor (or nested tensors) with a batch dimension; got none among "
                f"{len(args)} positional and {sorted(kwargs)} keyword inputs. Pass the batch."
            )
        if batch != num_chunks:
            args = pad_input_tensors(args, batch, num_chunks)
            kwargs = pad_input_tensors(kwargs, batch, num_chunks)
        forward(*args, **kwargs)
    elif state.is_last_process:
        output = forward()
    else:
        forward()
    return copy_tensor_to_devices(output) if gather_output else output

"""``prepare_pippy``: wraps a model for pipeline-parallel inference, one stage per process."""

from __future__ import annotations

import gc
import logging
import math
import os
from collections.abc import Sequence
from typing import Any, Union

import torch
from accel_bigmodel import load_checkpoint_in_model
from accel_collectives import broadcast, broadcast_object_list, send_to_device
from accel_state import PartialState
from torch import nn
from torch.utils import _pytree as pytree

from ._inputs import (
    InputSignature,
    check_call,
    input_signature,
    iter_rounds,
    merge_rounds,
    number_of_rounds,
)
from ._split_points import (
    check_called_once,
    check_split_points,
    find_split_points,
    probe_forward,
)
from ._stage_weights import (
    install_placeholders,
    keep_only_stage,
    meta_tensor_names,
    restore,
)
from ._trace import pipelining_api, trace_pipeline

logger = logging.getLogger("accel_pipeline")


class PipelinedForward:
    """The ``forward`` of a model prepared by [`prepare_pippy`][accel_pipeline.prepare_pippy].

    Every process calls it with the same inputs; the first process feeds them to the pipeline,
    which runs them in rounds of ``round_size`` rows (``num_chunks`` chunks each). The output is
    returned on the last process (on every process with ``gather_output``), ``None`` elsewhere.
    """

    def __init__(
        self,
        *,
        schedule: Any,
        original_forward: Any,
        state: PartialState,
        signature: InputSignature,
        round_size: int,
        num_chunks: int,
        output_example: Any,
        gather_output: bool,
    ) -> None:
        self.schedule = schedule
        self.original_forward = original_forward
        self.state = state
        self.signature = signature
        self.round_size = round_size
        self.num_chunks = num_chunks
        self.gather_output = gather_output
        leaves, self._output_spec = pytree.tree_flatten(output_example)
        self._output_leaves = leaves
        self._tensor_slots = [i for i, leaf in enumerate(leaves) if isinstance(leaf, torch.Tensor)]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        state = self.state
        if self.schedule is None:
            check_call(self.signature, args, kwargs)
            with torch.no_grad():
                return self.original_forward(*args, **kwargs)
        first, last = 0, state.num_processes - 1
        batch, problem = 0, ""
        if state.process_index == first:
            try:
                batch = check_call(self.signature, args, kwargs)
            except ValueError as err:
                problem = str(err)
        # Every process learns the batch size (or that the call is invalid) before any
        # point-to-point transfer, so a bad call raises everywhere instead of hanging.
        verdict = broadcast(torch.tensor([batch], dtype=torch.int64), from_process=first)
        batch = int(verdict.item())
        if batch <= 0:
            message = broadcast_object_list([problem], from_process=first)[0]
            raise ValueError(message)
        rounds: list[Sequence[torch.Tensor]] = []
        with torch.no_grad():
            if state.process_index == first:
                on_device = send_to_device((args, kwargs), state.device)
                rounds_in = iter_rounds(on_device[0], on_device[1], batch, self.round_size)
                for round_args, round_kwargs in rounds_in:
                    out = self.schedule.step(*round_args, **round_kwargs)
                    if out is not None:
                        rounds.append(self._flat(out))
            else:
                for _ in range(number_of_rounds(batch, self.round_size)):
                    out = self.schedule.step()
                    if out is not None:
                        rounds.append(self._flat(out))
        tensors = merge_rounds(rounds, batch) if state.process_index == last else None
        if self.gather_output and state.num_processes > 1:
            tensors = self._share(tensors, batch, last)
        if tensors is None:
            return None
        leaves = list(self._output_leaves)
        for slot, tensor in zip(self._tensor_slots, tensors):
            leaves[slot] = tensor
        return pytree.tree_unflatten(leaves, self._output_spec)

    def _flat(self, out: Any) -> list[torch.Tensor]:
        flat = list(out) if isinstance(out, (tuple, list)) else [out]
        if len(flat) != len(self._tensor_slots):
            raise RuntimeError(
                "The last pipeline stage must return one tensor per tensor of the model's output; "
                f"it returned {len(flat)} values for {len(self._tensor_slots)} output tensors. "
                "Return tensors (or containers of tensors) only from the model's forward."
            )
        return flat

    def _share(self, tensors: list[torch.Tensor] | None, batch: int, source: int) -> Any:
        if self.state.process_index != source:
            device = self.state.device
            tensors = [
                torch.empty(
                    (batch, *self._output_leaves[s].shape[1:]),
                    dtype=self._output_leaves[s].dtype,
                    device=device,
                )
                for s in self._tensor_slots
            ]
        return broadcast(tensors, from_process=source)


def _disable_cache(model: nn.Module) -> None:
    config = getattr(model, "config", None)
    if config is not None and getattr(config, "use_cache", False):
        # A key/value cache object cannot flow between pipeline stages.
        config.use_cache = False
        logger.info("prepare_pippy set %s.config.use_cache = False", type(model).__name__)


def _check_num_chunks(num_chunks: Any, num_processes: int) -> int:
    if num_chunks is None:
        return num_processes
    if isinstance(num_chunks, bool) or not isinstance(num_chunks, int) or num_chunks < 1:
        raise ValueError(
            f"num_chunks is the number of chunks each batch is cut into and must be a positive "
            f"integer; got {num_chunks!r}. Pass e.g. num_chunks={num_processes} (the default)."
        )
    return num_chunks


def _chunk_of(example: tuple[Any, dict[str, Any]], chunk_size: int) -> Any:
    return pytree.tree_map_only(torch.Tensor, lambda t: t[:chunk_size].clone(), example)


def prepare_pippy(
    model: nn.Module,
    split_points: Union[str, list[str]] = "auto",
    no_split_module_classes: list[str] | None = None,
    example_args: tuple[Any, ...] | None = (),
    example_kwargs: dict[str, Any] | None = None,
    num_chunks: int | None = None,
    gather_output: bool | None = False,
    *,
    checkpoint: Union[str, os.PathLike[str], None] = None,
) -> nn.Module:
    """Wraps ``model`` for pipeline-parallel inference: one stage of the model per process.

    The model is traced once on the example inputs with ``torch.distributed.pipelining`` (PyTorch's
    own pipeline runtime; the torchpippy package is not used), cut before each split point, and
    each process keeps the stage with its index. Calls then run a GPipe schedule
    (``ScheduleGPipe``): the batch is cut into ``num_chunks`` chunks that flow through the stages
    one after the other, so all processes work at once.

    Every process calls the returned model with the same inputs; only the first process's inputs
    are used. Calls run without gradients. Tracing fixes all shapes but the batch size: inputs
    must keep the example's structure, keyword names, dtypes and every dimension after the first.
    Any batch size works: a pipeline step takes ``num_chunks * ceil(example_batch / num_chunks)``
    rows, and a batch of another size is run in several steps, the last one filled up by
    repeating its last row; the extra rows never reach the output. A ``transformers`` model gets
    ``config.use_cache = False`` (a key/value cache cannot cross stages). Put the model in eval
    mode first: tracing records dropout as it is at that time.

    On several processes, each process keeps only its stage's weights: every parameter and
    buffer outside the stage is replaced by a ``meta`` tensor on ``model`` and its storage is
    freed (shrunk to zero bytes, so memory returns even where the traced program still refers to
    it). A tensor two stages share, such as an output head tied to the token embedding, is held
    by both. ``model`` can then no longer run whole on any process.

    A model too big for one process is built under ``init_empty_weights()`` and given a
    ``checkpoint``: the example forward and the trace run on placeholders (one zero per tensor,
    expanded to its shape: no weight memory), then each process reads only its stage's tensors
    from the (sharded) safetensors checkpoint with accel-bigmodel's streaming loader, each
    straight into its own memory. Buffers computed in ``__init__`` (rotary frequencies) keep
    their values, so build without ``include_buffers=True``.

    On a single process the model is not split and runs whole (same input checks); a
    ``checkpoint`` is loaded whole.

    Args:
        model: The model, with its weights on the CPU (each stage moves to its process's
            device), or built under ``init_empty_weights()`` with ``checkpoint`` given.
        split_points: ``"auto"`` finds balanced split points from the module sizes of
            [`accel_bigmodel.compute_module_sizes`][accel_bigmodel.compute_module_sizes] (one stage per process); otherwise a list
            of module names, each starting a stage (one fewer than the number of processes).
        no_split_module_classes: Class names of modules never cut inside by ``"auto"``; defaults
            to ``model._no_split_modules`` when the model defines it.
        example_args: Positional example inputs, shaped like a real call (a batch).
        example_kwargs: Keyword example inputs; every call must then pass the same keywords.
        num_chunks: Chunks each pipeline step cuts its batch into; defaults to the number of
            processes.
        gather_output: Send the output from the last process to every process.
        checkpoint: A safetensors file, index ``.json`` or folder (``save_pretrained`` output)
            holding the model's weights; required when the model has ``meta`` tensors. Each
            process loads only the tensors of its stage; a stage tensor built on ``meta`` that
            the checkpoint lacks is an error, raised before anything is loaded.

    Returns:
        ``model`` itself, whose ``forward`` now runs the pipeline. The original forward is kept as
        ``model._original_forward`` (it runs only on a single process: elsewhere the weights
        outside the stage are released); ``model.pippy_split_points`` and ``model.pippy_stage``
        describe the split, and on several processes ``model.pippy_stage_weights`` tells what
        this process kept (``kept``, ``released``, ``stage_bytes``, ``loaded_from``).

    Raises:
        ValueError: On invalid split points, ``num_chunks`` or example inputs, or a model with
            ``meta`` tensors and no ``checkpoint``.
        FileNotFoundError: When ``checkpoint`` does not exist (checked before tracing).
        accel_bigmodel.CheckpointKeysError: When the checkpoint lacks tensors of this stage
            that were built on ``meta``.
        PipelineTraceError: When the forward pass cannot be traced; names the failing module.
        ImportError: When torch has no ``torch.distributed.pipelining``.
    """
    state = PartialState()
    num_chunks = _check_num_chunks(num_chunks, state.num_processes)
    args = tuple(send_to_device(tuple(example_args or ()), "cpu"))
    kwargs = dict(send_to_device(dict(example_kwargs or {}), "cpu"))
    signature = input_signature(args, kwargs)
    unset = _check_weights(model, checkpoint)
    _disable_cache(model)
    if state.num_processes == 1 and checkpoint is not None:
        load_checkpoint_in_model(model, checkpoint)
        unset = []
    placeholders = install_placeholders(model) if unset else []
    try:
        names, probe = _plan(model, split_points, no_split_module_classes, args, kwargs, state)
        chunk_size = math.ceil(signature.batch_size / num_chunks)
        if state.num_processes == 1:
            schedule: Any = None
            stage: Any = None
        else:
            stage, schedule = _build_stage(
                model, names, (args, kwargs), chunk_size, num_chunks, checkpoint, set(unset), state
            )
    except BaseException:
        restore(placeholders)
        raise
    original_forward = model.forward
    model._original_forward = original_forward  # type: ignore[assignment]
    model.pippy_split_points = names  # type: ignore[assignment]
    model.pippy_stage = stage
    model.forward = PipelinedForward(
        schedule=schedule,
        original_forward=original_forward,
        state=state,
        signature=signature,
        round_size=chunk_size * num_chunks,
        num_chunks=num_chunks,
        output_example=probe.output,
        gather_output=bool(gather_output),
    )
    return model


def _check_weights(model: nn.Module, checkpoint: Any) -> list[str]:
    """Names of the model's ``meta`` tensors; checks that a checkpoint provides them."""
    if checkpoint is not None:
        if not isinstance(checkpoint, (str, os.PathLike)):
            raise TypeError(
                "checkpoint must be the path of a safetensors file, an index .json or a folder; "
                f"got a {type(checkpoint).__name__} ({checkpoint!r}). Pass a path."
            )
        if not os.path.exists(checkpoint):
            raise FileNotFoundError(
                f"checkpoint must be an existing file or folder; {os.fspath(checkpoint)!r} does "
                "not exist. Pass the folder the model was saved to (model.save_pretrained(...) "
                "or accel_bigmodel.shard_checkpoint writes one)."
            )
    unset = meta_tensor_names(model)
    if unset and checkpoint is None:
        raise ValueError(
            "prepare_pippy needs values for every weight of the model, but "
            f"{len(unset)} tensors are on the meta device (built under init_empty_weights): "
            f"{unset[:5]}{' ...' if len(unset) > 5 else ''}. Pass checkpoint='path/to/weights' so "
            "that each process loads only its stage's weights, or load the weights first."
        )
    return unset


def _plan(
    model: nn.Module,
    split_points: Union[str, list[str]],
    no_split_module_classes: list[str] | None,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    state: PartialState,
) -> tuple[list[str], Any]:
    """Split points, and one eager forward on the example inputs (output shapes, call counts)."""
    if split_points == "auto":
        names = find_split_points(
            model,
            state.num_processes,
            args,
            kwargs,
            no_split_module_classes=no_split_module_classes,
        )
    else:
        names = check_split_points(model, split_points, state.num_processes)
    watch = {name: model.get_submodule(name) for name in names}
    probe = probe_forward(model, args, kwargs, watch)
    check_called_once(probe, names)
    return names, probe


def _build_stage(
    model: nn.Module,
    names: list[str],
    example: tuple[tuple[Any, ...], dict[str, Any]],
    chunk_size: int,
    num_chunks: int,
    checkpoint: Any,
    unset: set[str],
    state: PartialState,
) -> tuple[Any, Any]:
    """Traces and cuts the model, keeps this process's stage and releases every other weight."""
    pipelining = pipelining_api()
    chunk_args, chunk_kwargs = _chunk_of(example, chunk_size)
    pipe = trace_pipeline(model, names, chunk_args, chunk_kwargs)
    if pipe.num_stages != state.num_processes:
        raise ValueError(
            f"There is one pipeline stage per process; tracing with split points {names} "
            f"gave {pipe.num_stages} stages for {state.num_processes} processes. Choose "
            "split points that are called in the forward pass, one fewer than the processes."
        )
    stage = pipe.build_stage(state.process_index, device=state.device)
    others = [child for child in pipe.split_gm.children() if child is not stage.submod]
    weights = keep_only_stage(
        model, stage.submod, others, checkpoint, unset=unset, device=state.device
    )
    del pipe, others
    gc.collect()
    model.pippy_stage_weights = weights  # type: ignore[assignment]
    schedule = pipelining.ScheduleGPipe(stage, n_microbatches=num_chunks)
    return stage, schedule

"""Tracing a model into pipeline stages with ``torch.distributed.pipelining``."""

from __future__ import annotations

import importlib.util
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import torch
from torch import nn
from torch.utils import _pytree as pytree

from ._graph import inline_inference_wrappers, split_marks

BACKEND = "torch.distributed.pipelining"
"""The pipeline runtime that ``prepare_pippy`` uses (PyTorch's own, not the torchpippy package)."""

_warned_about_torchpippy = False


class PipelineTraceError(RuntimeError):
    """Raised when a model's forward pass cannot be captured as one graph for pipelining.

    Attributes:
        module_name: Dotted name of the innermost submodule whose forward failed (``""`` for the
            model itself, ``None`` when it could not be told).
        module_class: Class name of that module.
    """

    def __init__(self, message: str, module_name: str | None, module_class: str | None) -> None:
        super().__init__(message)
        self.module_name = module_name
        self.module_class = module_class


def pipelining_api() -> Any:
    """Imports ``torch.distributed.pipelining``, saying which package is used.

    Raises:
        ImportError: When the installed torch has no ``torch.distributed.pipelining``.
    """
    global _warned_about_torchpippy
    try:
        import torch.distributed.pipelining as pipelining
    except ImportError as err:
        raise ImportError(
            f"prepare_pippy runs on {BACKEND}, which needs torch>=2.4; found torch "
            f"{torch.__version__}. The torchpippy package is not used. Upgrade torch: "
            "pip install 'torch>=2.4'."
        ) from err
    if not _warned_about_torchpippy and importlib.util.find_spec("pippy") is not None:
        _warned_about_torchpippy = True
        warnings.warn(
            f"torchpippy is installed but not used: prepare_pippy runs on {BACKEND} "
            f"(torch {torch.__version__}).",
            stacklevel=3,
        )
    return pipelining


class _InputsEnterFirst(nn.Module):
    """Runs ``model`` on copies of its tensor inputs made at the very start of the graph.

    ``torch.distributed.pipelining`` feeds the model's inputs to the first stage only; a later
    stage that reads an input directly (e.g. a classification head that finds the last real token
    in ``input_ids``) cannot run. The copies belong to the first stage and reach later stages as
    ordinary activations.
    """

    def __init__(self, model: nn.Module) -> None:
        super().__init__()
        self.inner = model

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        args, kwargs = pytree.tree_map_only(torch.Tensor, torch.clone, (args, kwargs))
        return self.inner(*args, **kwargs)


def _innermost_module(model: nn.Module, error: BaseException) -> tuple[str, nn.Module] | None:
    """The deepest submodule of ``model`` whose ``forward`` is on the failing call stack."""
    names = {id(module): (name, module) for name, module in model.named_modules()}
    found: tuple[str, nn.Module] | None = None
    depth = -1
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        tb = current.__traceback__
        while tb is not None:
            owner = tb.tb_frame.f_locals.get("self")
            if owner is not None and id(owner) in names:
                name, module = names[id(owner)]
                level = name.count(".") + 1 if name else 0
                if level >= depth:
                    found, depth = (name, module), level
            tb = tb.tb_next
        current = current.__cause__ or current.__context__
    return found


def _root_cause(error: BaseException) -> BaseException:
    seen: set[int] = set()
    while id(error) not in seen:
        seen.add(id(error))
        following = error.__cause__ or error.__context__
        if following is None:
            break
        error = following
    return error


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    line = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {line}" if line else type(error).__name__


def trace_pipeline(
    model: nn.Module,
    split_points: Sequence[str],
    chunk_args: tuple[Any, ...],
    chunk_kwargs: Mapping[str, Any] | None,
) -> Any:
    """Traces ``model`` on one chunk of inputs and cuts it before each split point.

    The split points are marked on the model only while tracing; the model's modules are left
    as they were.

    Args:
        model: The model.
        split_points: Names of the modules that start stages 1, 2, ...
        chunk_args: Positional inputs of one chunk.
        chunk_kwargs: Keyword inputs of one chunk.

    Returns:
        The ``torch.distributed.pipelining.Pipe``.

    Raises:
        PipelineTraceError: When the forward pass cannot be captured, naming the module.
    """
    pipelining = pipelining_api()
    try:
        with warnings.catch_warnings(), split_marks(model, split_points, pipelining.pipe_split):
            warnings.simplefilter("ignore", FutureWarning)
            return pipelining.pipeline(
                _InputsEnterFirst(model),
                mb_args=tuple(chunk_args),
                mb_kwargs=dict(chunk_kwargs) if chunk_kwargs else None,
                split_policy=inline_inference_wrappers,
            )
    except Exception as err:
        raise _trace_error(model, err) from err


def _trace_error(model: nn.Module, err: Exception) -> PipelineTraceError:
    located = _innermost_module(model, err)
    reason = _first_line(_root_cause(err))
    model_class = type(model).__name__
    if located is None:
        where = f"the forward pass of {model_class}"
        name, cls = None, None
    else:
        name, module = located
        cls = type(module).__name__
        where = f"{cls}.forward of submodule {name!r}" if name else f"{model_class}.forward"
    return PipelineTraceError(
        f"prepare_pippy captures the whole forward pass as one graph with torch.export, which "
        f"needs code without tensor-dependent Python control flow or untraceable outputs; "
        f"capturing {model_class} failed in {where}: {reason}. Rewrite that code with tensor "
        "operations (torch.where, torch.cond), return only tensors and containers of tensors, "
        "or run this model without pipeline parallelism.",
        module_name=name,
        module_class=cls,
    )

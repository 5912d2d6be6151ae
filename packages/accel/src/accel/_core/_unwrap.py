"""Getting the user's model back out of the wrappers that ``prepare`` and ``torch.compile`` add."""

from __future__ import annotations

import sys
from typing import Any

import torch

# The attribute the facade stores the model's own forward under when it adds autocast.
ORIGINAL_FORWARD = "_accel_original_forward"
# The attribute code written for the reference stores it under before wrapping ``forward``.
REFERENCE_ORIGINAL_FORWARD = "_original_forward"


def is_compiled_module(module: Any) -> bool:
    """Whether ``module`` is the wrapper ``torch.compile(module)`` returns."""
    compiled = getattr(getattr(torch, "_dynamo", None), "eval_frame", None)
    optimized = getattr(compiled, "OptimizedModule", None)
    return optimized is not None and isinstance(module, optimized)


def _compiled_by_regions(module: Any) -> bool:
    """Whether ``module`` is what ``compile_regions`` returns for a model with repeated blocks:
    a copy holding compiled submodules, with the original model as ``_orig_mod``."""
    return (
        isinstance(module, torch.nn.Module)
        and isinstance(module.__dict__.get("_orig_mod"), torch.nn.Module)
        and any(is_compiled_module(sub) for sub in module.modules())
    )


def _parallel_wrappers() -> tuple[type, ...]:
    """The wrapper classes that hold the model as ``.module``; only already-imported engines."""
    wrappers: list[type] = [torch.nn.parallel.DistributedDataParallel, torch.nn.DataParallel]
    deepspeed = sys.modules.get("deepspeed")
    if deepspeed is not None and hasattr(deepspeed, "DeepSpeedEngine"):
        wrappers.append(deepspeed.DeepSpeedEngine)
    fsdp = sys.modules.get("torch.distributed.fsdp")
    if fsdp is not None and hasattr(fsdp, "FullyShardedDataParallel"):
        wrappers.append(fsdp.FullyShardedDataParallel)
    return tuple(wrappers)


def _unwrap_tree(module: torch.nn.Module, wrappers: tuple[type, ...]) -> torch.nn.Module:
    while isinstance(module, wrappers):
        module = module.module  # type: ignore[assignment]
    for name, child in list(module.named_children()):
        setattr(module, name, _unwrap_tree(child, wrappers))
    return module


def _wraps(forward: Any, original: Any) -> bool:
    """Whether ``original`` is reached from ``forward`` through ``__wrapped__`` links."""
    seen: set[int] = set()
    while hasattr(forward, "__wrapped__") and id(forward) not in seen:
        seen.add(id(forward))
        forward = forward.__wrapped__
        if forward == original:
            return True
    return False


def _restore_forward(module: torch.nn.Module, original: Any) -> None:
    """Give ``module`` back ``original`` as its forward; the class's own forward bound to
    ``module`` is restored by dropping the instance attribute, so the model pickles."""
    own = getattr(type(module), "forward", None)
    if getattr(original, "__self__", None) is module and getattr(original, "__func__", None) is own:
        module.__dict__.pop("forward", None)
    else:
        module.forward = original


def extract_model_from_parallel(
    model: torch.nn.Module,
    keep_fp32_wrapper: bool = True,
    keep_torch_compile: bool = True,
    recursive: bool = False,
) -> torch.nn.Module:
    """Return the user's model from inside DDP, DataParallel, DeepSpeed, FSDP and compile
    wrappers.

    Args:
        model: A model, possibly wrapped by ``prepare`` and/or ``torch.compile``.
        keep_fp32_wrapper: Keep the mixed-precision wrapper ``prepare`` put on ``forward``;
            False restores the model's own ``forward``. A forward kept as
            ``model._original_forward`` (as code written for the reference does before wrapping
            ``forward``) is restored too when the current forward wraps it (through
            ``__wrapped__``); the unwrapped model then pickles.
        keep_torch_compile: Return the compiled wrapper (around the unwrapped model) when
            ``model`` was compiled; False returns the model under it.
        recursive: Also replace wrapped submodules (``layer = Wrapper(layer)``) by the module
            they wrap, in place, at any depth.

    Returns:
        The unwrapped model (the same object the user passed to ``prepare``).

    Example:
        >>> ddp = torch.nn.parallel.DistributedDataParallel(model)
        >>> extract_model_from_parallel(ddp) is model
        True
    """
    compiled = model if is_compiled_module(model) or _compiled_by_regions(model) else None
    inner: Any = model._orig_mod if compiled is not None else model
    wrappers = _parallel_wrappers()
    while isinstance(inner, wrappers):
        inner = inner.module  # type: ignore[attr-defined]
    if recursive:
        inner = _unwrap_tree(inner, wrappers)
    if not keep_fp32_wrapper and ORIGINAL_FORWARD in inner.__dict__:
        _restore_forward(inner, inner.__dict__.pop(ORIGINAL_FORWARD))
    reference_original = inner.__dict__.get(REFERENCE_ORIGINAL_FORWARD)
    if not keep_fp32_wrapper and reference_original is not None:
        if _wraps(inner.__dict__.get("forward"), reference_original):
            del inner.__dict__[REFERENCE_ORIGINAL_FORWARD]
            _restore_forward(inner, reference_original)
    if compiled is not None and keep_torch_compile:
        if is_compiled_module(compiled):
            compiled._orig_mod = inner
        else:
            compiled.__dict__["_orig_mod"] = inner
        return compiled
    return inner

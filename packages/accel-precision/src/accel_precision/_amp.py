"""Autocast and gradient scaling for ``mixed_precision="fp16" | "bf16"`` on any device."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from accel_state import AutocastKwargs, GradScalerKwargs, PrecisionType

_DTYPES = {PrecisionType.FP16: torch.float16, PrecisionType.BF16: torch.bfloat16}


def autocast_dtype(mixed_precision: str | PrecisionType) -> torch.dtype | None:
    """The dtype autocast computes in for ``mixed_precision`` (None for full precision)."""
    return _DTYPES.get(PrecisionType.parse(mixed_precision, "mixed_precision"))


def autocast_context(
    mixed_precision: str | PrecisionType,
    device_type: str,
    handler: AutocastKwargs | None = None,
    fp8_recipe: Any = None,
    training: bool = True,
) -> contextlib.AbstractContextManager[Any]:
    """A ``torch.autocast`` block for the run's precision, or a no-op for full precision.

    Args:
        mixed_precision: ``"no"``, ``"fp16"``, ``"bf16"`` (``"fp8"`` autocasts in bf16 around
            the FP8 layers).
        device_type: ``"cpu"``, ``"cuda"``, ``"xpu"`` ...
        handler: ``AutocastKwargs`` (``enabled``, ``cache_enabled``).
        fp8_recipe: With ``"fp8"``, the run's recipe; a Transformer Engine recipe adds
            ``te.fp8_autocast`` inside the bf16 block.
        training: Whether the model is in training mode (Transformer Engine runs FP8 only in
            training unless its recipe says otherwise).
    """
    precision = PrecisionType.parse(mixed_precision, "mixed_precision")
    if precision is PrecisionType.FP8:
        if fp8_recipe is not None:
            return _fp8_context(device_type, handler, fp8_recipe, training)
        precision = PrecisionType.BF16
    dtype = _DTYPES.get(precision)
    handler = handler or AutocastKwargs()
    if dtype is None or not handler.enabled:
        return contextlib.nullcontext()
    kwargs: dict[str, Any] = {"dtype": dtype}
    if handler.cache_enabled is not None:
        kwargs["cache_enabled"] = handler.cache_enabled
    return torch.autocast(device_type=device_type, **kwargs)


@contextlib.contextmanager
def _fp8_context(
    device_type: str, handler: AutocastKwargs | None, recipe: Any, training: bool
) -> Iterator[None]:
    from ._fp8 import fp8_forward_context

    with autocast_context("bf16", device_type, handler), fp8_forward_context(recipe, training):
        yield


def make_grad_scaler(
    mixed_precision: str | PrecisionType,
    device_type: str,
    handler: GradScalerKwargs | None = None,
) -> torch.amp.GradScaler | None:
    """A real ``torch.amp.GradScaler`` for fp16 training (None for other precisions).

    bf16 has fp32's exponent range and needs no loss scaling.
    """
    if PrecisionType.parse(mixed_precision, "mixed_precision") is not PrecisionType.FP16:
        return None
    kwargs = (handler or GradScalerKwargs()).to_kwargs()
    return torch.amp.GradScaler(device_type, **kwargs)


def convert_outputs_to_fp32(model_forward: Any) -> Any:
    """Wrap a model's ``forward`` so that floating outputs come back in fp32.

    Args:
        model_forward: The bound ``forward`` (or any callable) to wrap.
    """
    import functools

    def _to_fp32(value: Any) -> Any:
        if isinstance(value, torch.Tensor) and value.dtype in (torch.float16, torch.bfloat16):
            return value.float()
        if isinstance(value, dict):
            return type(value)({k: _to_fp32(v) for k, v in value.items()})
        if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
            return type(value)(_to_fp32(v) for v in value)
        return value

    @functools.wraps(model_forward)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return _to_fp32(model_forward(*args, **kwargs))

    wrapper.__wrapped__ = model_forward  # type: ignore[attr-defined]
    return wrapper

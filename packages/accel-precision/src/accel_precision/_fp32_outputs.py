"""Model outputs back in fp32 after a half-precision forward, and the reference's helpers
that build a grad scaler or an autocast block from the current state."""

from __future__ import annotations

import contextlib
import functools
import pickle
from collections.abc import Callable, Mapping
from typing import Any

import torch
from accel_state import AcceleratorState, AutocastKwargs, DistributedType

_HALF = (torch.float16, torch.bfloat16)


def _to_fp32(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.float() if value.dtype in _HALF else value
    if isinstance(value, Mapping):
        return type(value)({k: _to_fp32(v) for k, v in value.items()})  # type: ignore[call-arg]
    if isinstance(value, tuple) and hasattr(value, "_fields"):
        return type(value)(*(_to_fp32(v) for v in value))
    if isinstance(value, (list, tuple)):
        return type(value)(_to_fp32(v) for v in value)
    return value


class ConvertOutputsToFp32:
    """A callable that runs ``model_forward`` and turns its fp16 / bf16 tensors (nested in
    lists, tuples, namedtuples and dicts) into fp32.

    It refuses to be pickled: a model prepared for mixed precision must be unwrapped first.

    Args:
        model_forward: The function whose outputs are converted.
    """

    def __init__(self, model_forward: Callable[..., Any]) -> None:
        self.model_forward = model_forward
        functools.update_wrapper(self, model_forward)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return _to_fp32(self.model_forward(*args, **kwargs))

    def __getstate__(self) -> Any:
        raise pickle.PicklingError(
            "A forward wrapped for mixed precision cannot be pickled: the wrapper belongs to the "
            "prepared model, not to the model. Pickle accelerator.unwrap_model(model) instead."
        )


def convert_outputs_to_fp32(model_forward: Callable[..., Any]) -> Callable[..., Any]:
    """Wrap ``model_forward`` so that its floating outputs come back in fp32.

    The wrapper's ``__wrapped__`` is the [`ConvertOutputsToFp32`][accel_precision.ConvertOutputsToFp32] object, whose
    ``model_forward`` is the original function, so unwrapping finds it.
    """
    converter = ConvertOutputsToFp32(model_forward)

    @functools.wraps(model_forward)
    def forward(*args: Any, **kwargs: Any) -> Any:
        return converter(*args, **kwargs)

    forward.__wrapped__ = converter
    return forward


def _accelerator_device_type() -> str:
    if torch.cuda.is_available():
        return "cuda"
    for name in ("xpu", "mps", "hpu", "npu", "mlu", "musa", "sdaa"):
        backend = getattr(torch, name, None)
        is_available = getattr(backend, "is_available", None)
        if callable(is_available) and is_available():
            return name
    return "cpu"


def get_grad_scaler(distributed_type: DistributedType | None = None, **kwargs: Any) -> Any:
    """A gradient scaler for fp16 training on this machine's accelerator (CPU when none).

    Args:
        distributed_type: ``DistributedType.FSDP`` gives FSDP's ``ShardedGradScaler``, which
            handles sharded gradients; anything else a ``torch.amp.GradScaler``.
        **kwargs: Arguments of the scaler (``init_scale``, ``growth_factor`` ...).
    """
    if distributed_type == DistributedType.FSDP:
        from torch.distributed.fsdp.sharded_grad_scaler import ShardedGradScaler

        return ShardedGradScaler(device=_accelerator_device_type(), **kwargs)
    return torch.amp.GradScaler(_accelerator_device_type(), **kwargs)


def get_mixed_precision_context_manager(
    native_amp: bool = False, autocast_kwargs: AutocastKwargs | None = None
) -> contextlib.AbstractContextManager[Any]:
    """The autocast block of the current ``AcceleratorState``'s mixed precision.

    Args:
        native_amp: Whether to autocast at all; False gives a no-op context.
        autocast_kwargs: ``AutocastKwargs`` passed on to ``torch.autocast``.

    Returns:
        ``torch.autocast`` on the state's device type: float16 for ``"fp16"``, bfloat16 for
        ``"bf16"`` and ``"fp8"``, the device's default autocast dtype for ``"no"``.
    """
    if not native_amp:
        return contextlib.nullcontext()
    state = AcceleratorState()
    kwargs = autocast_kwargs.to_kwargs() if autocast_kwargs is not None else {}
    device_type = state.device.type
    precision = str(state.mixed_precision)
    if precision == "fp16":
        return torch.autocast(device_type=device_type, dtype=torch.float16, **kwargs)
    if precision in ("bf16", "fp8"):
        return torch.autocast(device_type=device_type, dtype=torch.bfloat16, **kwargs)
    return torch.autocast(device_type=device_type, **kwargs)

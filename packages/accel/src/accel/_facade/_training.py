"""The work of the ``Accelerator``'s training-step methods: backward, gradient accumulation,
context parallelism, clipping and autocast.

Each function takes the ``Accelerator`` first and calls its other methods through it
(``acc.no_sync``, ``acc.lomo_backward``), so a subclass that overrides one is honoured."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

import torch

if TYPE_CHECKING:
    from accel_state import AutocastKwargs

    from ._accelerator import Accelerator


class _FusedBackward(Protocol):
    """A LOMO optimizer (``lomo_optim.Lomo`` / ``AdaLomo``): it steps inside the backward."""

    def fused_backward(self, loss: torch.Tensor, lr: float, /) -> None: ...


def backward(acc: Accelerator, loss: torch.Tensor, **kwargs: Any) -> None:
    steps = acc.gradient_state.num_steps
    # DeepSpeed's switch: transformers' Trainer passes scale_wrt_gas=False for a loss it
    # already divided by the accumulation steps.
    if steps > 1 and kwargs.get("scale_wrt_gas", True):
        loss = loss / steps
    learning_rate = kwargs.get("learning_rate")
    if learning_rate is not None and _lomo_optimizers(acc):
        acc.lomo_backward(loss, learning_rate)
        return
    acc.engine.backward(loss, **kwargs)


def lomo_backward(acc: Accelerator, loss: torch.Tensor, learning_rate: float) -> None:
    fused = _lomo_optimizers(acc)
    if not fused:
        names = [type(getattr(opt, "optimizer", opt)).__name__ for opt in acc._prepared.optimizers]
        raise ValueError(
            "lomo_backward runs the fused backward of LOMO optimizers; got no Lomo or "
            f"AdaLomo among the prepared optimizers ({names or 'none prepared'}). Prepare a "
            "lomo_optim.Lomo / AdaLomo with accelerator.prepare, or call "
            "accelerator.backward(loss) for other optimizers."
        )
    for optimizer in fused:
        optimizer.fused_backward(loss, learning_rate)


def _lomo_optimizers(acc: Accelerator) -> list[_FusedBackward]:
    return [
        inner
        for inner in (getattr(opt, "optimizer", opt) for opt in acc._prepared.optimizers)
        if type(inner).__name__ in ("Lomo", "AdaLomo") and hasattr(inner, "fused_backward")
    ]


@contextlib.contextmanager
def maybe_context_parallel(
    acc: Accelerator,
    buffers: list[torch.Tensor] | None = None,
    buffer_seq_dims: list[int] | None = None,
    no_restore_buffers: set[torch.Tensor] | None = None,
) -> Iterator[None]:
    from .._engines.fsdp._context_parallel import check_buffers

    config = acc.parallelism_config
    cp_size = int(config.cp_size or 1) if config is not None else 1
    check_buffers(buffers, buffer_seq_dims, no_restore_buffers, cp_size)
    with acc.engine.context_parallel(
        list(buffers or []), list(buffer_seq_dims or []), no_restore_buffers
    ):
        yield


def _do_sync(acc: Accelerator) -> None:
    gs = acc.gradient_state
    if gs.sync_with_dataloader and gs.end_of_dataloader:
        acc.step = 0
        gs._set_sync_gradients(True)
    else:
        acc.step += 1
        gs._set_sync_gradients((acc.step % gs.num_steps) == 0)


@contextlib.contextmanager
def accumulate(acc: Accelerator, *models: torch.nn.Module) -> Iterator[None]:
    acc._do_sync()
    skip_sync = not acc.gradient_state.sync_gradients and not acc.gradient_state.sync_each_batch
    with contextlib.ExitStack() as stack:
        for model in models:
            if skip_sync:
                stack.enter_context(acc.no_sync(model))
        yield


@contextlib.contextmanager
def autocast(acc: Accelerator, autocast_handler: AutocastKwargs | None = None) -> Iterator[None]:
    from accel_precision import autocast_context
    from accel_state import AutocastKwargs

    handler = autocast_handler or acc._handler(AutocastKwargs)
    with autocast_context(acc.state.mixed_precision, acc.state.device.type, handler):
        yield


def unscale_gradients(acc: Accelerator, optimizer: Any = None) -> None:
    if acc.scaler is None:
        return
    if optimizer is None:
        optimizers = acc._prepared.optimizers
    elif isinstance(optimizer, (list, tuple)):
        optimizers = list(optimizer)
    else:
        optimizers = [optimizer]
    for opt in optimizers:
        if getattr(opt, "_unscaled", False):
            continue
        acc.scaler.unscale_(getattr(opt, "optimizer", opt))
        if hasattr(opt, "_unscaled"):
            opt._unscaled = True


def clip_grad_norm_(
    acc: Accelerator,
    parameters: Iterable[torch.nn.Parameter],
    max_norm: float,
    norm_type: float = 2,
) -> torch.Tensor:
    parameters = list(parameters)
    acc.unscale_gradients()
    return acc.engine.clip_grad_norm_(parameters, max_norm, norm_type)


def clip_grad_value_(
    acc: Accelerator, parameters: Iterable[torch.nn.Parameter], clip_value: float
) -> None:
    parameters = list(parameters)
    acc.unscale_gradients()
    torch.nn.utils.clip_grad_value_(parameters, clip_value)

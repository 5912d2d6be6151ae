"""Data parallelism with ``torch.nn.parallel.DistributedDataParallel`` (gloo or nccl)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from accel_state import DistributedDataParallelKwargs
from torch.nn.parallel import DistributedDataParallel

from ._base import Engine


class DDPEngine(Engine):
    """Each process holds the whole model; gradients are averaged in the backward pass."""

    def wrap_model(self, model: torch.nn.Module, evaluation_mode: bool) -> torch.nn.Module:
        if evaluation_mode or not any(p.requires_grad for p in model.parameters()):
            return model
        handler = self.context.handler(DistributedDataParallelKwargs)
        kwargs = handler.to_kwargs() if handler else {}
        device = self.context.device
        device_ids = [device.index] if device.type != "cpu" and device.index is not None else None
        wrapped = DistributedDataParallel(model, device_ids=device_ids, **kwargs)
        if handler is not None:
            handler.register_comm_hook(wrapped)
        return wrapped

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return model.module if isinstance(model, DistributedDataParallel) else model

    def is_wrapped(self, model: torch.nn.Module) -> bool:
        return isinstance(model, DistributedDataParallel)

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[object]:
        if isinstance(model, DistributedDataParallel):
            return model.no_sync()
        return contextlib.nullcontext()


@contextlib.contextmanager
def trigger_sync_in_backward(model: torch.nn.Module) -> Iterator[None]:
    """Make the next backward pass of a DDP ``model`` synchronise gradients, even inside
    ``no_sync`` (the reducer is armed now, and the sync flags are restored on exit); any other
    model is left alone."""
    if not isinstance(model, DistributedDataParallel):
        yield
        return
    old_grad, old_param = model.require_backward_grad_sync, model.require_forward_param_sync
    model.require_backward_grad_sync = True
    model.require_forward_param_sync = True
    model.reducer.prepare_for_backward([])
    try:
        yield
    finally:
        model.require_backward_grad_sync = old_grad
        model.require_forward_param_sync = old_param

"""The engine interface, and the single-process engine that implements it plainly."""

from __future__ import annotations

import contextlib
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from .._accelerator import Accelerator


class Engine:
    """Single process: the model only moves to the device. Subclasses wrap it."""

    def __init__(self, accelerator: Accelerator) -> None:
        self.accelerator = accelerator

    def wrap_model(self, model: torch.nn.Module, evaluation_mode: bool) -> torch.nn.Module:
        """Wrap ``model`` for training (or only place it when ``evaluation_mode``)."""
        return model

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """Return the user's module inside the engine's wrapper."""
        return model

    def is_wrapped(self, model: torch.nn.Module) -> bool:
        """Whether ``model`` is this engine's wrapper."""
        return False

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[Any]:
        """Context in which backward passes do not synchronise gradients."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Run the backward pass of ``loss`` (already scaled for accumulation)."""
        scaler = self.accelerator.scaler
        if scaler is not None:
            scaler.scale(loss).backward(**kwargs)
        else:
            loss.backward(**kwargs)

    def clip_grad_norm_(
        self, parameters: Iterable[torch.nn.Parameter], max_norm: float, norm_type: float = 2
    ) -> torch.Tensor:
        """Clip the global gradient norm; return the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

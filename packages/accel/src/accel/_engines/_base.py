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

    handles_mixed_precision: bool = False
    """Whether the engine casts weights and scales losses itself (no autocast, no grad scaler
    from the Accelerator)."""
    replicated_states: bool = True
    """Whether every process holds whole model and optimizer states (False: each holds shards,
    saved and loaded by :meth:`save_engine_state` / :meth:`load_engine_state`)."""

    def __init__(self, accelerator: Accelerator) -> None:
        self.accelerator = accelerator

    def prepare_all(self, objects: list[Any]) -> dict[int, Any]:
        """Prepare objects that the engine needs together (model, optimizer, scheduler).

        Called by ``prepare`` after the dataloaders are prepared, with every object passed.

        Returns:
            The prepared objects by position; the facade prepares the others one by one.
        """
        return {}

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

    def model_state_dict(self, model: torch.nn.Module) -> dict[str, Any]:
        """The full state dict of a prepared ``model`` (call on every process)."""
        return self.unwrap(model).state_dict()

    def save_engine_state(self, output_dir: str) -> None:
        """Write the sharded states this engine owns into ``output_dir`` (every process)."""

    def load_engine_state(self, input_dir: str, **load_kwargs: Any) -> None:
        """Read back what :meth:`save_engine_state` wrote (every process)."""

    def release(self) -> None:
        """Drop what the engine holds on prepared objects (``free_memory``)."""

    def clip_grad_norm_(
        self, parameters: Iterable[torch.nn.Parameter], max_norm: float, norm_type: float = 2
    ) -> torch.Tensor:
        """Clip the global gradient norm; return the norm before clipping."""
        return torch.nn.utils.clip_grad_norm_(parameters, max_norm, norm_type=norm_type)

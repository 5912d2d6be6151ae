"""XLA replicas (torch_xla, PJRT): the model moves to the replica's XLA device, gradients are
averaged across replicas by the optimizer step (torch_xla's ``optimizer_step`` semantics)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

import torch

from .._core._xla_step import reduce_xla_gradients, xla_optimizer_step
from ._base import Engine

if TYPE_CHECKING:
    from ._context import EngineContext


class XLAEngine(Engine):
    """The model lives on the XLA device; replicas stay in step through the optimizer step.

    Moving a module to an XLA device gives it new parameter objects (a CPU tensor cannot become
    an XLA tensor in place), so optimizers built on the CPU parameters are pointed at the new
    ones when they are prepared.
    """

    def __init__(self, context: EngineContext) -> None:
        super().__init__(context)
        self._moved: dict[int, torch.nn.Parameter] = {}

    def place_model(self, model: torch.nn.Module) -> torch.nn.Module:
        """Move ``model`` to the XLA device, remembering which parameter became which."""
        before = list(model.parameters())
        model = model.to(self.context.device)
        for old, new in zip(before, model.parameters()):
            if old is not new:
                self._moved[id(old)] = new
        return model

    def adapt_optimizer(self, optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
        """Point ``optimizer`` (and its per-parameter state) at the moved parameters."""
        if not self._moved:
            return optimizer
        for group in optimizer.param_groups:
            group["params"] = [self._moved.get(id(p), p) for p in group["params"]]
        moved_state = {self._moved.get(id(p), p): v for p, v in optimizer.state.items()}
        optimizer.state.clear()
        optimizer.state.update(moved_state)
        return optimizer

    def release(self) -> None:
        """Forget the parameter mapping."""
        self._moved.clear()

    def clip_grad_norm_(
        self, parameters: Iterable[torch.nn.Parameter], max_norm: float, norm_type: float = 2
    ) -> torch.Tensor:
        """Average gradients across replicas first (the step then skips it), then clip."""
        params = list(parameters)
        reduce_xla_gradients(params, self.context.num_processes)
        self.context.gradient_state.is_xla_gradients_synced = True
        return torch.nn.utils.clip_grad_norm_(params, max_norm, norm_type=norm_type)


__all__ = ["XLAEngine", "reduce_xla_gradients", "xla_optimizer_step"]

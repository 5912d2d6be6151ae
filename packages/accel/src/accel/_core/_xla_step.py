"""The optimizer step of an XLA replica: gradients averaged across the replicas, then the step,
then the lazy graph cut and run. The XLA engine and the optimizer wrapper both take it."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
from accel_state import GradientState, xla_mark_step, xla_model


def reduce_xla_gradients(parameters: Iterable[torch.nn.Parameter], num_processes: int) -> None:
    """Average the gradients of ``parameters`` across the ``num_processes`` replicas, in place
    (one all-reduce)."""
    if num_processes <= 1:
        return
    grads = [p.grad for p in parameters if p.grad is not None]
    if grads:
        xla_model().all_reduce("sum", grads, scale=1.0 / num_processes)


def xla_optimizer_step(
    optimizer: torch.optim.Optimizer,
    closure: Any,
    gradients: GradientState,
    num_processes: int,
) -> Any:
    """One optimizer step of an XLA replica.

    Gradients are averaged across the replicas (unless ``clip_grad_norm_`` already did it this
    step), the optimizer steps, and the lazy graph is cut and run (``mark_step``), as
    ``xm.optimizer_step`` followed by ``xm.mark_step`` do.
    """
    if not gradients.is_xla_gradients_synced:
        reduce_xla_gradients(
            (p for group in optimizer.param_groups for p in group["params"]), num_processes
        )
    gradients.is_xla_gradients_synced = False
    result = optimizer.step(closure) if closure is not None else optimizer.step()
    xla_mark_step()
    return result

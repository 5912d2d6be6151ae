"""Objects a DeepSpeed run hands back from ``prepare``, and the placeholders that stand for an
optimizer or scheduler written in the DeepSpeed config.

DeepSpeed performs the optimizer step (with clipping, loss scaling and zeroing of gradients)
inside its own ``step``, which the engine calls from ``accelerator.backward`` at the end of each
accumulation cycle. The wrappers below keep the usual training loop valid: their ``step`` and
``zero_grad`` do nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import torch

from ..._core._optimizer_wrappers import AcceleratedOptimizer, AcceleratedScheduler


class DummyOptim:
    """Stands for the optimizer of the DeepSpeed config (its ``"optimizer"`` section).

    ``"auto"`` values of ``optimizer.params`` are filled from ``lr``, ``weight_decay`` and the
    other keyword arguments (``betas``, ``eps`` ...).

    Args:
        params: The model parameters (or parameter groups) to optimize.
        lr: Learning rate.
        weight_decay: Weight decay.
        **kwargs: Other optimizer parameters written as ``"auto"`` in the config.
    """

    def __init__(
        self,
        params: Iterable[Any],
        lr: float = 0.001,
        weight_decay: float = 0.0,
        **kwargs: Any,
    ) -> None:
        self.params = list(params)
        self.lr = lr
        self.weight_decay = weight_decay
        self.kwargs = kwargs


class DummyScheduler:
    """Stands for the scheduler of the DeepSpeed config (its ``"scheduler"`` section), or
    builds one from ``lr_scheduler_callable(optimizer)`` once DeepSpeed made the optimizer.

    Args:
        optimizer: The [`DummyOptim`][accel.utils.DummyOptim] (or optimizer) it schedules.
        total_num_steps: Fills ``scheduler.params.total_num_steps`` when ``"auto"``.
        warmup_num_steps: Fills ``scheduler.params.warmup_num_steps`` when ``"auto"``.
        lr_scheduler_callable: Builds the scheduler from DeepSpeed's optimizer (no config
            section needed then).
        **kwargs: Other scheduler parameters written as ``"auto"`` in the config.
    """

    def __init__(
        self,
        optimizer: Any,
        total_num_steps: int | None = None,
        warmup_num_steps: int = 0,
        lr_scheduler_callable: Callable[[Any], Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self.optimizer = optimizer
        self.total_num_steps = total_num_steps
        self.warmup_num_steps = warmup_num_steps
        self.lr_scheduler_callable = lr_scheduler_callable
        self.kwargs = kwargs


class DeepSpeedEngineWrapper:
    """Runs backward passes and steps on a DeepSpeed engine at accumulation boundaries.

    Args:
        engine: A ``deepspeed.DeepSpeedEngine``.
    """

    def __init__(self, engine: Any) -> None:
        self.engine = engine

    def backward(self, loss: torch.Tensor, sync_gradients: bool = True, **kwargs: Any) -> None:
        """Backward of ``loss`` (already divided by the accumulation steps, unless the caller
        passed ``scale_wrt_gas=False``: then as given); at the end of a cycle
        (``sync_gradients``), reduce gradients, clip, step and zero them."""
        self.engine.set_gradient_accumulation_boundary(sync_gradients)
        kwargs.pop("scale_wrt_gas", None)
        self.engine.backward(loss, scale_wrt_gas=False, **kwargs)
        if sync_gradients:
            self.engine.step()

    def get_global_grad_norm(self) -> float | None:
        """Norm of the gradients at the last step (before clipping), as DeepSpeed computed it."""
        norm = self.engine.get_global_grad_norm()
        return float(norm) if norm is not None else None


class DeepSpeedOptimizerWrapper(AcceleratedOptimizer):
    """The optimizer of a DeepSpeed run: ``step`` and ``zero_grad`` are done by the engine.

    ``optimizer`` is the optimizer the user passed (whose ``param_groups`` DeepSpeed steps, so
    learning-rate changes reach it); ``engine_optimizer`` is DeepSpeed's (ZeRO) optimizer.

    Args:
        optimizer: The user's optimizer, or DeepSpeed's when the config defines it.
        engine: The ``deepspeed.DeepSpeedEngine`` that steps it; None when ``optimizer`` is
            DeepSpeed's own optimizer (``engine.optimizer``), as the reference library builds it.
    """

    def __init__(self, optimizer: Any, *, engine: Any = None) -> None:
        super().__init__(optimizer, device_placement=False, scaler=None)
        self.engine = engine
        self.engine_optimizer = engine.optimizer if engine is not None else optimizer

    def zero_grad(self, set_to_none: bool | None = None) -> None:
        """Nothing: DeepSpeed zeroes gradients after its step."""

    def step(self, closure: Any = None) -> None:  # type: ignore[override]
        """Nothing: DeepSpeed steps inside ``accelerator.backward`` at the end of a cycle."""

    def state_dict(self) -> dict[str, Any]:
        return self.engine_optimizer.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.engine_optimizer.load_state_dict(state_dict)

    @property
    def step_was_skipped(self) -> bool:
        """Whether DeepSpeed skipped the last step (fp16 overflow)."""
        return bool(getattr(self.engine_optimizer, "overflow", False))

    def __repr__(self) -> str:
        return f"DeepSpeedOptimizerWrapper({self.optimizer!r})"


class DeepSpeedSchedulerWrapper(AcceleratedScheduler):
    """The scheduler of the DeepSpeed config: DeepSpeed steps it with its optimizer, so
    ``step`` does nothing.

    Args:
        scheduler: DeepSpeed's learning-rate scheduler.
        optimizers: The prepared optimizers it follows.
    """

    def __init__(self, scheduler: Any, optimizers: list[AcceleratedOptimizer]) -> None:
        super().__init__(scheduler, optimizers)

    def step(self, *args: Any, **kwargs: Any) -> None:
        """Nothing: DeepSpeed steps this scheduler inside its own step."""

    def __repr__(self) -> str:
        return f"DeepSpeedSchedulerWrapper({self.scheduler!r})"

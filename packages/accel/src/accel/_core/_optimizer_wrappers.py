"""Optimizer and scheduler wrappers: step only at the end of an accumulation cycle, step with
the grad scaler under fp16, and keep the schedule in step with real optimizer steps."""

from __future__ import annotations

import functools
import warnings
from typing import Any

import torch
from accel_collectives import honor_type
from accel_state import AcceleratorState, DistributedType, GradientState


class AcceleratedOptimizer(torch.optim.Optimizer):
    """Wraps an optimizer for accumulation and mixed precision.

    ``step`` and ``zero_grad`` do nothing while gradients are being accumulated (between two
    synchronisations); under fp16 ``step`` goes through the grad scaler, and
    [`step_was_skipped`][accel.AcceleratedOptimizer.step_was_skipped] says whether the scaler skipped it because of inf/nan gradients.
    On XLA the step averages gradients across replicas, then marks a step of the lazy graph.
    A LOMO optimizer (``lomo_optim.Lomo`` / ``AdaLomo``) updates the parameters inside the
    backward pass ([`backward`][accel.Accelerator.backward] with ``learning_rate=``): its
    ``step`` does nothing.
    """

    def __init__(
        self,
        optimizer: torch.optim.Optimizer,
        device_placement: bool = True,
        scaler: torch.amp.GradScaler | None = None,
    ) -> None:
        self.optimizer = optimizer
        self.scaler = scaler
        self.gradient_state = GradientState()
        self.device_placement = device_placement
        self._is_overflow = False
        self._unscaled = False
        self._fused_update = type(optimizer).__name__ in ("Lomo", "AdaLomo")
        if device_placement:
            device = AcceleratorState().device
            if device.type != "cpu":
                state = optimizer.state_dict()
                _move_state(state, device)
                optimizer.load_state_dict(state)

    # The wrapped optimizer owns these; reading and writing goes straight through.
    @property
    def state(self) -> Any:
        return self.optimizer.state

    @state.setter
    def state(self, value: Any) -> None:
        self.optimizer.state = value

    @property
    def param_groups(self) -> Any:
        return self.optimizer.param_groups

    @param_groups.setter
    def param_groups(self, value: Any) -> None:
        self.optimizer.param_groups = value

    @property
    def defaults(self) -> Any:
        return self.optimizer.defaults

    @defaults.setter
    def defaults(self, value: Any) -> None:
        self.optimizer.defaults = value

    def add_param_group(self, param_group: dict[str, Any]) -> None:
        self.optimizer.add_param_group(param_group)

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        if self.device_placement and AcceleratorState().device.type != "cpu":
            _move_state(state_dict, AcceleratorState().device)
        self.optimizer.load_state_dict(state_dict)

    def state_dict(self) -> dict[str, Any]:
        return self.optimizer.state_dict()

    def zero_grad(self, set_to_none: bool | None = None) -> None:
        if not self.gradient_state.sync_gradients:
            return
        if set_to_none is None:
            self.optimizer.zero_grad()
        else:
            self.optimizer.zero_grad(set_to_none=set_to_none)

    def train(self) -> None:
        """Switch schedule-free style optimizers to training mode (no-op otherwise)."""
        if hasattr(self.optimizer, "train"):
            self.optimizer.train()

    def eval(self) -> None:
        """Switch schedule-free style optimizers to evaluation mode (no-op otherwise)."""
        if hasattr(self.optimizer, "eval"):
            self.optimizer.eval()

    def step(self, closure: Any = None) -> Any:
        if self._fused_update or not self.gradient_state.sync_gradients:
            return None
        if self.scaler is None:
            self._is_overflow = False
            state = AcceleratorState()
            if state.distributed_type == DistributedType.XLA:
                from ._xla_step import xla_optimizer_step

                return xla_optimizer_step(
                    self.optimizer, closure, self.gradient_state, state.num_processes
                )
            return self.optimizer.step(closure) if closure is not None else self.optimizer.step()
        scale_before = self.scaler.get_scale()
        result = (
            self.scaler.step(self.optimizer, closure)
            if closure
            else self.scaler.step(self.optimizer)
        )
        self.scaler.update()
        self._unscaled = False
        # The scaler lowers its scale exactly when it found inf/nan and skipped the step.
        self._is_overflow = self.scaler.get_scale() < scale_before
        return result

    @property
    def step_was_skipped(self) -> bool:
        """Whether the last ``step`` was skipped because of inf/nan gradients."""
        return self._is_overflow

    def __getstate__(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "gradient_state"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self.gradient_state = GradientState()

    def __repr__(self) -> str:
        return f"AcceleratedOptimizer({self.optimizer!r})"


def move_to_device(state: Any, device: Any) -> Any:
    """Return ``state`` with every tensor moved to ``device``, through lists, tuples (named
    ones too) and dicts, which keep their types; other values come back as they are.

    Args:
        state: An optimizer state (or any nested container of tensors).
        device: Where the tensors go.
    """
    if isinstance(state, (list, tuple)):
        return honor_type(state, (move_to_device(t, device) for t in state))
    if isinstance(state, dict):
        return type(state)({k: move_to_device(v, device) for k, v in state.items()})
    if isinstance(state, torch.Tensor):
        return state.to(device)
    return state


def patch_optimizer_step(accelerated_optimizer: AcceleratedOptimizer, method: Any) -> Any:
    """Wrap an optimizer's ``step`` so that calling it records
    ``accelerated_optimizer._accelerate_step_called = True`` (a grad scaler that skips a step
    never calls it).

    Args:
        accelerated_optimizer: The optimizer that records the call.
        method: The bound ``step`` to wrap.

    Returns:
        A function taking ``method``'s arguments and returning its result.
    """

    @functools.wraps(method)
    def patched_step(*args: Any, **kwargs: Any) -> Any:
        accelerated_optimizer._accelerate_step_called = True  # type: ignore[attr-defined]
        return method(*args, **kwargs)

    return patched_step


def _move_state(state_dict: dict[str, Any], device: torch.device) -> None:
    for per_param in state_dict.get("state", {}).values():
        for key, value in per_param.items():
            if isinstance(value, torch.Tensor) and key != "step":
                per_param[key] = value.to(device)


class AcceleratedScheduler:
    """Wraps a learning-rate scheduler so it follows real optimizer steps.

    It does not step while gradients accumulate, nor when the optimizer skipped its step
    (fp16 overflow). Without ``split_batches`` each call steps once per process, so a schedule
    written for a single process over N batches of the whole dataset keeps its length when the
    batches are spread over several processes.
    """

    def __init__(
        self,
        scheduler: Any,
        optimizers: list[AcceleratedOptimizer],
        step_with_optimizer: bool = True,
        split_batches: bool = False,
    ) -> None:
        self.scheduler = scheduler
        self.optimizers = optimizers
        self.split_batches = split_batches
        self.step_with_optimizer = step_with_optimizer
        self.gradient_state = GradientState()

    def step(self, *args: Any, **kwargs: Any) -> None:
        if not self.step_with_optimizer:
            self.scheduler.step(*args, **kwargs)
            return
        if not self.gradient_state.sync_gradients:
            if self.gradient_state.adjust_scheduler:
                self.scheduler._step_count += 1
            return
        if any(opt.step_was_skipped for opt in self.optimizers):
            return
        repeats = 1 if self.split_batches else AcceleratorState().num_processes
        total = getattr(self.scheduler, "total_steps", None)
        with warnings.catch_warnings():
            # Stepping a scheduler before the optimizer is fine here: both are under our control.
            warnings.filterwarnings("ignore", message=".*lr_scheduler.step.*optimizer.step.*")
            for _ in range(repeats):
                if total is not None and self.scheduler._step_count > total:
                    break
                self.scheduler.step(*args, **kwargs)

    def get_last_lr(self) -> list[float]:
        return self.scheduler.get_last_lr()

    def state_dict(self) -> dict[str, Any]:
        return self.scheduler.state_dict()

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self.scheduler.load_state_dict(state_dict)

    def get_lr(self) -> Any:
        return self.scheduler.get_lr()

    def print_lr(self, *args: Any, **kwargs: Any) -> Any:
        return self.scheduler.print_lr(*args, **kwargs)

    def __repr__(self) -> str:
        return f"AcceleratedScheduler({self.scheduler!r})"

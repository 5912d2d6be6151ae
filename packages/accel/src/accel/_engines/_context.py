"""What an engine is given to work with: the run's state and the registry, never the facade."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    import torch
    from accel_state import AcceleratorState, GradientState, KwargsHandler

    from .._core._prepared_objects import PreparedObjects

_Handler = TypeVar("_Handler", bound="KwargsHandler")


@dataclass(frozen=True)
class EngineContext:
    """The explicit inputs of an engine.

    The ``Accelerator`` builds one and gives it to the engine of the run; a test or another
    tool builds one from a state and a registry and drives an engine with no ``Accelerator``.
    """

    state: AcceleratorState
    """The run's shared state: processes, device, mixed precision, plugins, parallelism."""
    gradient_state: GradientState
    """Gradient accumulation: the number of steps and whether this step synchronises."""
    prepared: PreparedObjects
    """Where the engine registers what it prepares (DeepSpeed's optimizer and scheduler
    wrappers) and finds what was prepared before (dataloaders that size the batch)."""
    handlers: Mapping[type, KwargsHandler] = field(default_factory=dict)
    """The kwargs handlers of the run by class (``DistributedDataParallelKwargs`` ...)."""
    scaler: torch.amp.GradScaler | None = None
    """The fp16 grad scaler that scales losses in ``backward`` (None: no scaling)."""

    @property
    def device(self) -> torch.device:
        """The device of this process."""
        return self.state.device

    @property
    def num_processes(self) -> int:
        """Total number of processes."""
        return int(self.state.num_processes)

    @property
    def process_index(self) -> int:
        """Global index of this process."""
        return int(self.state.process_index)

    @property
    def mixed_precision(self) -> str:
        """``"no"``, ``"fp16"``, ``"bf16"`` or ``"fp8"``."""
        return str(self.state.mixed_precision)

    def handler(self, kind: type[_Handler]) -> _Handler | None:
        """The kwargs handler of class ``kind`` the run was given, else None."""
        found = self.handlers.get(kind)
        return found if isinstance(found, kind) else None

    @property
    def gradient_accumulation_steps(self) -> int:
        """Batches accumulated per optimizer step."""
        return int(self.gradient_state.num_steps)

    def set_gradient_accumulation_steps(self, steps: int) -> None:
        """Change the number of accumulated batches for the whole run (an engine whose own
        configuration fixes it, e.g. DeepSpeed's config)."""
        self.gradient_state.plugin_kwargs.update({"num_steps": steps})

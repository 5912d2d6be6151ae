"""The fields every group of ``Accelerator`` methods works with, declared once.

``Accelerator`` gathers its methods by job (preparing, the training loop, collectives and
process control, tracking, checkpointing), one base class per module. Each of those classes
derives from `AcceleratorCore`, which declares the fields ``Accelerator.__init__`` sets,
so every method is checked against the fields it reads without naming the facade. The methods
read these fields (``self.state.device``), not the facade's properties.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch
    from accel_data import DataLoaderConfiguration
    from accel_state import (
        AcceleratorState,
        GradientState,
        KwargsHandler,
        ParallelismConfig,
        ProjectConfiguration,
    )

    from .._core._prepared_objects import PreparedObjects
    from .._engines import Engine
    from .._training_checkpoints._checkpointer import Checkpointer


class AcceleratorCore:
    """The fields of an ``Accelerator``: declarations only, each set by its ``__init__``."""

    state: AcceleratorState
    """The run's shared state: processes, device, mixed precision, plugins."""
    gradient_state: GradientState
    """Gradient accumulation: the number of steps and whether this step synchronises."""
    engine: Engine
    """The engine of the run (DDP, FSDP, DeepSpeed ...), built from an ``EngineContext``."""
    _prepared: PreparedObjects
    """The registry of prepared and registered objects."""
    _checkpointer: Checkpointer
    """The checkpoint component (``save_state`` / ``load_state``)."""
    _handlers: dict[type, KwargsHandler]
    """The kwargs handlers passed, by class."""
    scaler: torch.amp.GradScaler | None
    """The fp16 grad scaler (None: no scaling, or the engine scales)."""
    project_configuration: ProjectConfiguration
    """Folders of the project, checkpoint naming and limits."""
    dataloader_config: DataLoaderConfiguration
    """How prepared dataloaders shard, dispatch and place batches."""
    parallelism_config: ParallelismConfig | None
    """How processes split between data, shard, tensor and context parallelism."""
    device_placement: bool
    """Whether prepared objects move to the device by default."""
    step_scheduler_with_optimizer: bool
    """Whether prepared schedulers step only when their optimizer steps."""
    rng_types: list[str] | None
    """Generators synchronised at the start of each epoch of a prepared loader."""
    native_amp: bool
    """Whether prepared models' forward runs under the run's autocast."""
    fp8_recipe_handler: Any
    """The FP8 recipe of the run (None without FP8)."""
    _fp8_replaced_params: dict[Any, Any]
    """Parameters the FP8 conversion replaced, old to new (for optimizers prepared later)."""
    step: int
    """Batches seen in the current accumulation cycle (saved by ``save_state``)."""
    flag_tensor: torch.Tensor | None
    """The flag of ``set_trigger`` (None: never raised)."""
    log_with: Any
    """The trackers resolved from ``log_with`` (None: no tracking)."""
    trackers: list[Any]
    """The started trackers (after ``init_trackers``)."""
    _tracker_set: Any = None
    """The running trackers of ``init_trackers`` (None before it)."""

    def _handler(self, kind: type) -> Any:
        """The kwargs handler of class ``kind`` that was passed, else None."""
        return self._handlers.get(kind)


def fp8_backend_of(recipe: Any) -> str:
    """FP8 engine of a recipe: ``"AO"`` (torchao), ``"TE"``, ``"MSAMP"``, or ``"NO"`` for None."""
    if recipe is None:
        return "NO"
    from accel_precision import recipe_backend

    return str(recipe_backend(recipe).value)

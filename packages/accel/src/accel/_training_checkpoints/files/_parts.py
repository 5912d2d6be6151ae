"""What the checkpoint functions use of a run, declared as protocols.

The functions that write and read a checkpoint (``_save_pipeline``, ``_load``,
``_async_save``) take these parts rather than the `Checkpointer` that
holds them, so that none of them imports the class that calls it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import torch
    from accel_state import ProjectConfiguration

    from ..._core._prepared_objects import PreparedObjects
    from ..._engines import Engine


class Processes(Protocol):
    """Where this process stands in the run (``PartialState`` and ``AcceleratorState`` are)."""

    @property
    def process_index(self) -> int: ...

    @property
    def num_processes(self) -> int: ...

    @property
    def is_main_process(self) -> bool: ...

    @property
    def is_local_main_process(self) -> bool: ...


class CheckpointParts(Processes, Protocol):
    """The settings, objects and engine of a run that a checkpoint is written from and read
    into (a ``Checkpointer`` is one)."""

    project_configuration: ProjectConfiguration
    """Where checkpoints go (automatic naming, ``total_limit``, ``save_on_each_node``)."""
    prepared: PreparedObjects
    """The prepared and registered objects."""
    engine: Engine
    """The engine that gathers and loads model and optimizer states."""
    scaler: torch.amp.GradScaler | None
    """The fp16 grad scaler (None: none)."""
    mixed_precision: str
    """The run's mixed precision."""

    @property
    def is_writer(self) -> bool:
        """Whether this process writes the files shared by all processes."""
        ...

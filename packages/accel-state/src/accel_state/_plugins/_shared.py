"""Plugins and configuration dataclasses that the launcher, the facade and engines share."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import environment_variables as env
from .._enums import DynamoBackend
from ._kwargs import KwargsHandler


@dataclass
class GradientAccumulationPlugin(KwargsHandler):
    """How gradient accumulation behaves."""

    num_steps: int | None = None
    """Number of batches whose gradients are accumulated before an optimizer step."""
    adjust_scheduler: bool = True
    """Scale scheduler steps so the schedule follows optimizer steps, not batches."""
    sync_with_dataloader: bool = True
    """Synchronise (and step) at the end of a dataloader even mid-cycle."""
    sync_each_batch: bool = False
    """All-reduce gradients on every batch while accumulating (less memory, more traffic)."""

    def __post_init__(self) -> None:
        if self.num_steps is not None and (
            not isinstance(self.num_steps, int) or self.num_steps < 1
        ):
            raise ValueError(
                "GradientAccumulationPlugin.num_steps must be an integer >= 1; "
                f"got {self.num_steps!r}. Use 1 to disable accumulation."
            )


@dataclass
class TorchDynamoPlugin(KwargsHandler):
    """How models are compiled with ``torch.compile``."""

    backend: DynamoBackend | str | None = None
    """The compile backend (``ACCEL_DYNAMO_BACKEND`` when None; ``"no"`` disables)."""
    mode: str | None = None
    """``"default"``, ``"reduce-overhead"``, ``"max-autotune"`` ... (``ACCEL_DYNAMO_MODE``)."""
    fullgraph: bool | None = None
    """Refuse graph breaks (``ACCEL_DYNAMO_USE_FULLGRAPH``)."""
    dynamic: bool | None = None
    """Use dynamic shapes (``ACCEL_DYNAMO_USE_DYNAMIC``)."""
    options: Any = None
    """Backend options passed to ``torch.compile``."""
    disable: bool = False
    """Turn compilation off."""
    use_regional_compilation: bool | None = None
    """Compile each repeated block once instead of the whole model (faster cold start)."""

    def __post_init__(self) -> None:
        if self.backend is None:
            self.backend = env.read_env(env.ACCEL_DYNAMO_BACKEND, "no")
        self.backend = DynamoBackend.parse(self.backend, "dynamo backend")
        if self.mode is None:
            self.mode = env.read_env(env.ACCEL_DYNAMO_MODE, "default")
        if self.fullgraph is None:
            self.fullgraph = env.read_env(env.ACCEL_DYNAMO_USE_FULLGRAPH, False)
        if self.dynamic is None:
            self.dynamic = env.read_env(env.ACCEL_DYNAMO_USE_DYNAMIC)
        if self.use_regional_compilation is None:
            self.use_regional_compilation = env.read_env(
                env.ACCEL_DYNAMO_USE_REGIONAL_COMPILATION, False
            )

    @property
    def enabled(self) -> bool:
        """Whether models are compiled."""
        return self.backend is not DynamoBackend.NO and not self.disable

    def to_dict(self) -> dict[str, Any]:
        """Every field, with the backend as ``torch.compile`` names it (lower case)."""
        config = super().to_dict()
        config["backend"] = self.backend.value.lower()  # type: ignore[union-attr]
        return config

    def to_kwargs(self) -> dict[str, Any]:
        """The ``torch.compile`` arguments that differ from their defaults
        (``use_regional_compilation`` is not one of them)."""
        kwargs = super().to_kwargs()
        kwargs.pop("use_regional_compilation", None)
        return kwargs


@dataclass
class ProjectConfiguration:
    """Where a run writes its checkpoints and logs, and how checkpoints are named and rotated."""

    project_dir: str | None = None
    """Folder of the project; checkpoints go to ``<project_dir>/checkpoints``."""
    logging_dir: str | None = None
    """Folder of tracker logs (defaults to ``project_dir``)."""
    automatic_checkpoint_naming: bool = False
    """Name checkpoints ``checkpoint_<iteration>`` inside ``<project_dir>/checkpoints``."""
    total_limit: int | None = None
    """Keep at most this many checkpoints (the newest complete one is never deleted)."""
    iteration: int = 0
    """Index of the next automatic checkpoint."""
    save_on_each_node: bool = False
    """Write shared files once per machine instead of once per job (no shared filesystem)."""
    async_save: bool = field(default=False, kw_only=True)
    """(Keyword only.) ``save_state`` copies the states to host memory and writes the files on a background
    thread while training goes on (an accel extension; ``save_state(async_save=...)`` decides
    per call)."""

    def __post_init__(self) -> None:
        if self.logging_dir is None:
            self.logging_dir = self.project_dir
        if self.total_limit is not None and self.total_limit < 1:
            raise ValueError(
                f"ProjectConfiguration.total_limit must be >= 1 or None; got {self.total_limit}. "
                "Use None to keep every checkpoint."
            )

    def set_directories(self, project_dir: str | None = None) -> None:
        """Set ``project_dir`` and, when unset, ``logging_dir``."""
        self.project_dir = project_dir
        if self.logging_dir is None:
            self.logging_dir = project_dir

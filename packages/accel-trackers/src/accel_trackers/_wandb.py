"""Weights & Biases adapter (works offline with `WANDB_MODE=offline`)."""

from __future__ import annotations

import os
from typing import Any

from ._base import BackendTracker
from ._values import normalize, warn_once

__all__ = ["WandBTracker"]


class WandBTracker(BackendTracker):
    """Log to a Weights & Biases run.

    Args:
        run_name: The W&B project name.
        logging_dir: Directory for W&B's local files (its `dir`), unless `dir` is given.
        **kwargs: Passed to `wandb.init` (e.g. `mode="offline"`, `name`, `entity`).
    """

    name = "wandb"
    requires_logging_directory = False
    _module = "wandb"
    _extra = "wandb"

    def __init__(
        self, run_name: str, logging_dir: str | os.PathLike[str] | None = None, **kwargs: Any
    ) -> None:
        super().__init__()
        self.run_name = run_name
        self.logging_dir = os.fspath(logging_dir) if logging_dir is not None else None
        self._kwargs = kwargs

    def _open(self) -> Any:
        wandb = self._backend()
        kwargs = dict(self._kwargs)
        if self.logging_dir is not None and "dir" not in kwargs:
            os.makedirs(self.logging_dir, exist_ok=True)
            kwargs["dir"] = self.logging_dir
        return wandb.init(project=self.run_name, **kwargs)

    @property
    def run(self) -> Any:
        """The `wandb.Run` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration in `run.config` (nested dicts and None are kept)."""
        if not self._active():
            return
        self._run.config.update(normalize(values, flat=False), allow_val_change=True)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numbers, strings and lists; None values are skipped."""
        if not self._active():
            return
        flat = normalize(values)
        skipped = [k for k, v in flat.items() if v is None]
        warn_once(self._warned, self.name, skipped, "None is not a value")
        clean = {k: v for k, v in flat.items() if v is not None}
        if clean:
            self._run.log(clean, step=step, **kwargs)

    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log lists of images (arrays, PIL images ...) as `wandb.Image` objects."""
        if not self._active():
            return
        wandb = self._backend()
        images = {k: [wandb.Image(image) for image in v] for k, v in values.items()}
        self._run.log(images, step=step, **kwargs)

    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Log a `wandb.Table` built from `columns` + `data` or from a pandas `dataframe`."""
        if not self._active():
            return
        wandb = self._backend()
        table = wandb.Table(columns=columns, data=data, dataframe=dataframe)
        self._run.log({table_name: table}, step=step, **kwargs)

    def _close(self) -> None:
        self._run.finish()

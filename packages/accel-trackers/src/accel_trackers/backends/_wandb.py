"""Weights & Biases adapter (works offline with `WANDB_MODE=offline`)."""

from __future__ import annotations

from typing import Any

from .._tracker_interface import BackendTracker
from .._values import normalize

__all__ = ["WandBTracker"]


class WandBTracker(BackendTracker):
    """Log to a Weights & Biases run.

    Args:
        run_name: The W&B project name.
        **kwargs: Passed to `wandb.init` (e.g. `mode="offline"`, `name`, `entity`). A
            `logging_dir` keyword is W&B's `dir` (its local files) unless `dir` is given.
    """

    name = "wandb"
    requires_logging_directory = False
    takes_logging_dir = True
    _module = "wandb"
    _extra = "wandb"

    def __init__(self, run_name: str, **kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self.logging_dir = self._keep_options(kwargs)

    def _open(self) -> Any:
        wandb = self._backend()
        return wandb.init(project=self.run_name, **self._options_with_dir("dir"))

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
        if self._active():
            self._log_all_but_none(values, step, **kwargs)

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

"""ClearML adapter (works offline with `offline=True` or `CLEARML_OFFLINE_MODE=1`)."""

from __future__ import annotations

import os
from typing import Any

from ._tracker_interface import BackendTracker
from ._values import is_number, normalize, warn_once

__all__ = ["ClearMLTracker"]

_SERIES_PREFIXES = ("train", "eval", "test", "val", "validation")


def _title_series(key: str) -> tuple[str, str]:
    """ "eval_loss" or "eval/loss" -> ("loss", "eval") so train and eval share one graph."""
    for prefix in _SERIES_PREFIXES:
        for sep in ("/", "_"):
            head = prefix + sep
            if key.startswith(head) and len(key) > len(head):
                return key[len(head) :], prefix
    return key, key


class ClearMLTracker(BackendTracker):
    """Log to a ClearML task.

    The project and task names default to `CLEARML_PROJECT` / `CLEARML_TASK`, else
    `run_name`. An already running task (`Task.current_task()`) is reused and left open.

    Args:
        run_name: Project and task name.
        **kwargs: Passed to `Task.init`, except `offline`: when given, `Task.set_offline(offline)`
            is called first (absent or None leaves the mode alone).
    """

    name = "clearml"
    requires_logging_directory = False
    _module = "clearml"
    _extra = "clearml"

    def __init__(self, run_name: str | None = None, **kwargs: Any):
        super().__init__()
        self.run_name = run_name
        self._offline: bool | None = kwargs.pop("offline", None)
        self._kwargs = kwargs
        self._owns_task = False

    def _open(self) -> Any:
        clearml = self._backend()
        if self._offline is not None:
            clearml.Task.set_offline(self._offline)
        current = clearml.Task.current_task()
        if current is not None:
            return current
        kwargs = dict(self._kwargs)
        kwargs.setdefault("project_name", os.environ.get("CLEARML_PROJECT", self.run_name))
        kwargs.setdefault("task_name", os.environ.get("CLEARML_TASK", self.run_name))
        self._owns_task = True
        return clearml.Task.init(**kwargs)

    @property
    def task(self) -> Any:
        """The ClearML `Task` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration as the task's hyper-parameters (nested keys joined by "/")."""
        if not self._active():
            return
        self._run.connect(normalize(values), name="hparams")

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Report numbers as scalars (single values when `step` is None), strings as text."""
        if not self._active():
            return
        reporter = self._run.get_logger()
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value):
                if step is None:
                    reporter.report_single_value(name=key, value=value, **kwargs)
                else:
                    title, series = _title_series(key)
                    reporter.report_scalar(
                        title=title, series=series, value=value, iteration=step, **kwargs
                    )
            elif isinstance(value, str):
                reporter.report_text(f"{key}: {value}")
            else:
                skipped.append(key)
        warn_once(self._warned, self.name, skipped, "only numbers and strings can be logged")

    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Report a table from a pandas `dataframe` or from `columns` + `data`."""
        if not self._active():
            return
        table = dataframe
        if table is None:
            table = [list(columns)] + [list(row) for row in data or []] if columns else data
        title, series = _title_series(table_name)
        self._run.get_logger().report_table(
            title=title, series=series, table_plot=table, iteration=step or 0, **kwargs
        )

    def _close(self) -> None:
        if self._owns_task:
            self._run.close()

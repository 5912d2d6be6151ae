"""ClearML adapter (works offline with `offline=True` or `CLEARML_OFFLINE_MODE=1`)."""

from __future__ import annotations

import os
from typing import Any

from .._tracker_interface import BackendTracker
from .._values import is_number, normalize, warn_once

__all__ = ["ClearMLTracker"]

_SERIES_PREFIXES = ("train", "eval", "test", "val", "validation")


def _title_series(key: str) -> tuple[str, str]:
    """ "eval_loss" or "eval/loss" -> ("loss", "eval"), "loss" -> ("loss", "train"): train and
    eval values of one quantity share a graph, one line each."""
    for prefix in _SERIES_PREFIXES:
        for sep in ("/", "_"):
            head = prefix + sep
            if key.startswith(head) and len(key) > len(head):
                return key[len(head) :], prefix
    return key, "train"


_REPORT_SETTING = "development.report_use_subprocess"


def _report_from_threads_unless_configured(clearml: Any) -> None:
    """Make ClearML report from threads, unless its configuration chooses.

    On Linux, `Task.init` forks a reporting process while a thread it has just started runs
    git to detect the repository. When the fork lands while that thread is starting git, the
    reporting process inherits the pipe through which git's start is confirmed, so the thread
    waits for the reporter to end, and `Task.close()` waits up to 300 s for the thread: the
    second task of a process typically finishes five minutes late. Reporting from threads (what
    ClearML does on other systems, and `sdk.development.report_use_subprocess: false` in
    clearml.conf) forks nothing. A value set in the configuration is left as it is.
    """
    try:
        from clearml.config import ConfigSDKWrapper

        if ConfigSDKWrapper.get(_REPORT_SETTING, None) is not None:
            return
    except Exception:  # a ClearML without this configuration reader: leave it alone
        return
    for cls in clearml.Task.__mro__:
        if "_report_subprocess_enabled" in vars(cls):
            cls._report_subprocess_enabled = False
            return


class ClearMLTracker(BackendTracker):
    """Log to a ClearML task.

    The project and task names default to `CLEARML_PROJECT` / `CLEARML_TASK`, else
    `run_name`. An already running task (`Task.current_task()`) is reused and left open.
    Unless ClearML's configuration sets `sdk.development.report_use_subprocess`, the task
    reports from threads rather than from a forked process (see
    `_report_from_threads_unless_configured`: the fork can delay the end of a run by 300 s).

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
        self.init_kwargs = kwargs
        self._owns_task = False

    def _open(self) -> Any:
        clearml = self._backend()
        if self._offline is not None:
            clearml.Task.set_offline(self._offline)
        current = clearml.Task.current_task()
        if current is not None:
            return current
        kwargs = dict(self.init_kwargs)
        kwargs.setdefault("project_name", os.environ.get("CLEARML_PROJECT", self.run_name))
        kwargs.setdefault("task_name", os.environ.get("CLEARML_TASK", self.run_name))
        _report_from_threads_unless_configured(clearml)
        self._owns_task = True
        return clearml.Task.init(**kwargs)

    @property
    def task(self) -> Any:
        """The ClearML `Task` (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration twice: as the task's configuration object "General" (nesting
        kept, as the reference library does) and as hyper-parameters under "hparams" (nested
        keys joined by "/"), which ClearML compares across tasks."""
        if not self._active():
            return
        self._run.connect_configuration(normalize(values, flat=False))
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

    def log_images(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Report images (numpy arrays H x W or H x W x C, PIL images), one per key or a list
        per key (the i-th image of a list goes to the series `{series}/{i}`).

        Keys are split into title and series as in `log`; `kwargs` go to `report_image`.
        """
        if not self._active():
            return
        reporter = self._run.get_logger()
        for key, value in values.items():
            title, series = _title_series(key)
            if isinstance(value, (list, tuple)):
                for index, image in enumerate(value):
                    reporter.report_image(
                        title=title,
                        series=f"{series}/{index}",
                        iteration=step,
                        image=image,
                        **kwargs,
                    )
            else:
                reporter.report_image(
                    title=title, series=series, iteration=step, image=value, **kwargs
                )

    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Report a table from a pandas `dataframe` or from `data` (whose first row is the
        header when `columns` is None).

        Raises:
            ValueError: If neither `dataframe` nor `data` is given.
        """
        if dataframe is None and data is None:
            raise ValueError(
                f"ClearMLTracker.log_table({table_name!r}) needs the rows: got dataframe=None "
                "and data=None. Pass dataframe=<pandas.DataFrame>, or data=[[...], ...] (with "
                "columns=[...] or a header as its first row)."
            )
        if not self._active():
            return
        table = dataframe
        if table is None:
            rows = [list(row) for row in data or []]
            table = [list(columns), *rows] if columns else rows
        title, series = _title_series(table_name)
        self._run.get_logger().report_table(
            title=title, series=series, table_plot=table, iteration=step or 0, **kwargs
        )

    def _close(self) -> None:
        if self._owns_task:
            self._run.close()

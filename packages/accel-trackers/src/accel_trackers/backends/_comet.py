"""Comet ML adapter (works offline with `online=False` / `OfflineExperiment`)."""

from __future__ import annotations

from typing import Any

from .._tracker_interface import BackendTracker
from .._values import is_number, normalize, stringify_unsupported, warn_once

__all__ = ["CometMLTracker"]


class CometMLTracker(BackendTracker):
    """Log to a Comet ML experiment.

    Args:
        run_name: The Comet project name.
        **kwargs: Passed to `comet_ml.start` (e.g. `online=False` for an offline archive
            written to `COMET_OFFLINE_DIRECTORY`), or to `comet_ml.Experiment` on old
            releases without `start`.
    """

    name = "comet_ml"
    requires_logging_directory = False
    _module = "comet_ml"
    _extra = "comet"

    def __init__(self, run_name: str, **kwargs: Any) -> None:
        super().__init__()
        self.run_name = run_name
        self._kwargs = kwargs

    def _open(self) -> Any:
        comet_ml = self._backend()
        if hasattr(comet_ml, "start"):
            return comet_ml.start(project_name=self.run_name, **self._kwargs)
        return comet_ml.Experiment(project_name=self.run_name, **self._kwargs)

    @property
    def writer(self) -> Any:
        """The Comet experiment (same as `tracker`)."""
        return self.tracker

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration as parameters; None and lists are stored as text."""
        if not self._active():
            return
        params = stringify_unsupported(
            normalize(values), (bool, int, float, str), tracker=self.name
        )
        self._run.log_parameters(params)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Numbers become metrics, strings become "other" fields; None is skipped."""
        if not self._active():
            return
        if step is not None:
            self._run.set_step(step)
        metrics: dict[str, Any] = {}
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value):
                metrics[key] = value
            elif isinstance(value, str):
                self._run.log_other(key, value)
            else:
                skipped.append(key)
        warn_once(self._warned, self.name, skipped, "only numbers and strings can be logged")
        if metrics:
            self._run.log_metrics(metrics, step=step, **kwargs)

    def log_table(
        self,
        table_name: str,
        columns: list[str] | None = None,
        data: list[list[Any]] | None = None,
        dataframe: Any = None,
        step: int | None = None,
        **kwargs: Any,
    ) -> None:
        """Log a table file (e.g. "preds.csv") from `columns` + `data` or a `dataframe`."""
        if not self._active():
            return
        if step is not None:
            self._run.set_step(step)
        if dataframe is not None:
            self._run.log_table(table_name, tabular_data=dataframe, **kwargs)
        else:
            self._run.log_table(table_name, tabular_data=data, headers=columns or False, **kwargs)

    def _close(self) -> None:
        self._run.end()

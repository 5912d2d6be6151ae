"""MLflow adapter: a local SQLite store in the logging directory, or any tracking URI."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ._tracker_interface import BackendTracker, logger
from ._values import is_number, normalize, warn_once

__all__ = ["MLflowTracker"]

_PARAM_BATCH = 100


class MLflowTracker(BackendTracker):
    """Log to an MLflow run.

    Where the data goes: `MLFLOW_TRACKING_URI` when set; otherwise, with a `logging_dir`,
    a SQLite store `logging_dir/mlflow.db` with artifacts in `logging_dir/mlartifacts`;
    otherwise MLflow's own default.

    Args:
        experiment_name: The MLflow experiment (created if missing); `MLFLOW_EXPERIMENT_NAME`
            overrides it.
        logging_dir: Local directory of the store (see above).
        run_id: Resume this run instead of creating one.
        tags: Tags of the run.
        nested_run: Start the run nested in the active one.
        run_name: Name of the run.
        description: Description of the run.
    """

    name = "mlflow"
    requires_logging_directory = False
    _module = "mlflow"
    _extra = "mlflow"

    def __init__(
        self,
        experiment_name: str | None = None,
        logging_dir: str | os.PathLike[str] | None = None,
        run_id: str | None = None,
        tags: dict[str, Any] | None = None,
        nested_run: bool = False,
        run_name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__()
        self.experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", experiment_name)
        self.logging_dir = os.fspath(logging_dir) if logging_dir is not None else None
        self._run_id = os.environ.get("MLFLOW_RUN_ID", run_id)
        self._tags = tags
        self._nested = nested_run
        self._run_name = run_name
        self._description = description

    def _open(self) -> Any:
        mlflow = self._backend()
        artifact_location = None
        if self.logging_dir is not None and not os.environ.get("MLFLOW_TRACKING_URI"):
            root = Path(self.logging_dir).resolve()
            root.mkdir(parents=True, exist_ok=True)
            mlflow.set_tracking_uri(f"sqlite:///{root / 'mlflow.db'}")
            artifact_location = (root / "mlartifacts").as_uri()
        experiment_id = None
        if self.experiment_name:
            experiment = mlflow.get_experiment_by_name(self.experiment_name)
            if experiment is None:
                experiment_id = mlflow.create_experiment(
                    self.experiment_name, artifact_location=artifact_location
                )
            else:
                experiment_id = experiment.experiment_id
        run = mlflow.start_run(
            run_id=self._run_id,
            experiment_id=experiment_id,
            run_name=self._run_name,
            nested=self._nested,
            tags=self._tags,
            description=self._description,
        )
        self._run_id = run.info.run_id
        return run

    @property
    def run_id(self) -> str | None:
        """Id of the MLflow run, once started."""
        return self._run_id

    def store_init_configuration(self, values: dict[str, Any]) -> None:
        """Store the configuration as run parameters (text; too long values are cut).

        MLflow keeps parameters as strings of bounded length; a value longer than that is
        truncated with a warning naming it.
        """
        if not self._active():
            return
        mlflow = self._backend()
        try:
            from mlflow.utils.validation import MAX_PARAM_VAL_LENGTH as limit
        except ImportError:
            limit = 500
        params: dict[str, str] = {}
        truncated = []
        for key, value in normalize(values).items():
            text = str(value)
            if len(text) > limit:
                truncated.append(key)
                text = text[:limit]
            params[key] = text
        if truncated:
            logger.warning(
                "mlflow keeps parameter values of at most %d characters; truncated: %s",
                limit,
                ", ".join(truncated),
            )
        client = mlflow.MlflowClient()
        items = list(params.items())
        for start in range(0, len(items), _PARAM_BATCH):
            batch = [mlflow.entities.Param(k, v) for k, v in items[start : start + _PARAM_BATCH]]
            client.log_batch(self._run_id, params=batch)

    def log(self, values: dict[str, Any], step: int | None = None, **kwargs: Any) -> None:
        """Log numeric metrics; strings, None and other values are skipped with a warning."""
        if not self._active():
            return
        mlflow = self._backend()
        metrics = {}
        skipped = []
        for key, value in normalize(values).items():
            if is_number(value):
                metrics[key] = float(value)
            else:
                skipped.append(key)
        warn_once(self._warned, self.name, skipped, "MLflow metrics must be numbers")
        if metrics:
            mlflow.log_metrics(metrics, step=step, run_id=self._run_id, **kwargs)

    def _close(self) -> None:
        mlflow = self._backend()
        active = mlflow.active_run()
        if active is not None and active.info.run_id == self._run_id:
            mlflow.end_run()
        else:
            mlflow.MlflowClient().set_terminated(self._run_id)

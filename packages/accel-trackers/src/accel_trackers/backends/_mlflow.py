"""MLflow adapter: a local SQLite store in the logging directory, or any tracking URI."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .._tracker_interface import BackendTracker, logger
from .._values import is_number, normalize, warn_once

__all__ = ["MLflowTracker"]

_PARAM_BATCH = 100
_YES = ("y", "yes", "t", "true", "on", "1")
_NO = ("n", "no", "f", "false", "off", "0")


def _yes_no(text: str, variable: str) -> bool:
    """The boolean that the yes/no word `text` of `variable` means."""
    word = text.strip().lower()
    if word in _YES or word in _NO:
        return word in _YES
    raise ValueError(
        f"{variable} must be a yes/no word ({', '.join(_YES)} or {', '.join(_NO)}); got "
        f"{text!r}. Set it to e.g. 'true' or 'false', or unset it."
    )


def _tags(tags: dict[str, Any] | str | None, source: str) -> dict[str, Any] | None:
    """The tags given as a dict, or as the JSON text of one."""
    if tags is None or isinstance(tags, dict):
        return tags
    try:
        parsed = json.loads(tags)
    except json.JSONDecodeError as err:
        parsed = err
    if not isinstance(parsed, dict):
        raise ValueError(
            f"MLflow tags ({source}) must be a dict or the JSON text of an object; got "
            f'{tags!r}. Write them as e.g. \'{{"team": "vision"}}\'.'
        )
    return parsed


class MLflowTracker(BackendTracker):
    """Log to an MLflow run.

    Where the data goes: `MLFLOW_TRACKING_URI` when set; otherwise, with a `logging_dir`,
    a SQLite store `logging_dir/mlflow.db` with artifacts in `logging_dir/mlartifacts`;
    otherwise MLflow's own default.

    Args:
        experiment_name: The MLflow experiment (created if missing); `MLFLOW_EXPERIMENT_NAME`
            overrides it.
        logging_dir: Local directory of the store (see above).
        run_id: Resume this run instead of creating one; `MLFLOW_RUN_ID` overrides it.
        tags: Tags of the run, as a dict or its JSON text; `MLFLOW_TAGS` (JSON) overrides it.
        nested_run: Start the run nested in the active one; `MLFLOW_NESTED_RUN` (a yes/no
            word such as "true", "0", "off") overrides it.
        run_name: Name of the run.
        description: Description of the run.

    Raises:
        ValueError: If `MLFLOW_NESTED_RUN` is not a yes/no word, or the tags are not a JSON
            object.
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
        tags: dict[str, Any] | str | None = None,
        nested_run: bool = False,
        run_name: str | None = None,
        description: str | None = None,
    ) -> None:
        super().__init__()
        self.experiment_name = os.environ.get("MLFLOW_EXPERIMENT_NAME", experiment_name)
        self.logging_dir = os.fspath(logging_dir) if logging_dir is not None else None
        self._run_id = os.environ.get("MLFLOW_RUN_ID", run_id)
        env_tags = os.environ.get("MLFLOW_TAGS")
        self.tags = _tags(env_tags, "MLFLOW_TAGS") if env_tags is not None else _tags(tags, "tags")
        """Tags of the run (None for none)."""
        env_nested = os.environ.get("MLFLOW_NESTED_RUN")
        self.nested_run = (
            _yes_no(env_nested, "MLFLOW_NESTED_RUN") if env_nested is not None else bool(nested_run)
        )
        """Whether the run is started nested in the active one."""
        self.run_name = run_name
        self.description = description

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
            run_name=self.run_name,
            nested=self.nested_run,
            tags=self.tags,
            description=self.description,
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

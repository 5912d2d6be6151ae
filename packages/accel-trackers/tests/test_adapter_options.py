"""Options of the adapters that the reference library also reads: environment variables, aliases."""

import importlib.util
import json

import pytest

from accel_trackers import AimTracker, DVCLiveTracker, MLflowTracker


def needs(module: str):
    """Skip marker for a test that needs the backend package `module`."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed here; install the accel-trackers extra that "
        "provides it, or run `uv sync --all-packages --group test`",
    )


@pytest.mark.parametrize(
    ("word", "expected"),
    [(w, False) for w in ("False", "false", "0", "no", "off", " N ")]
    + [(w, True) for w in ("True", "true", "1", "yes", "on", "Y")],
)
def test_mlflow_nested_run_variable_is_a_yes_no_word(monkeypatch, word, expected):
    monkeypatch.setenv("MLFLOW_NESTED_RUN", word)
    # The variable wins over the argument both ways.
    assert MLflowTracker("exp", nested_run=not expected).nested_run is expected


def test_mlflow_nested_run_argument_without_the_variable(monkeypatch):
    monkeypatch.delenv("MLFLOW_NESTED_RUN", raising=False)
    assert MLflowTracker("exp").nested_run is False
    assert MLflowTracker("exp", nested_run=True).nested_run is True


def test_mlflow_nested_run_variable_that_is_no_word_is_refused(monkeypatch):
    monkeypatch.setenv("MLFLOW_NESTED_RUN", "maybe")
    with pytest.raises(ValueError, match=r"MLFLOW_NESTED_RUN must be a yes/no word .*'maybe'"):
        MLflowTracker("exp")


def test_mlflow_tags_from_json_text_and_from_the_variable(monkeypatch):
    monkeypatch.delenv("MLFLOW_TAGS", raising=False)
    assert MLflowTracker("exp", tags='{"team": "vision"}').tags == {"team": "vision"}
    assert MLflowTracker("exp", tags={"a": 1}).tags == {"a": 1}
    monkeypatch.setenv("MLFLOW_TAGS", json.dumps({"from": "env"}))
    assert MLflowTracker("exp", tags={"a": 1}).tags == {"from": "env"}
    monkeypatch.setenv("MLFLOW_TAGS", "[1, 2]")
    with pytest.raises(ValueError, match=r"MLFLOW_TAGS.*must be a dict.*'\[1, 2\]'"):
        MLflowTracker("exp")


@needs("mlflow")
def test_mlflow_run_is_nested_when_the_variable_says_so(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    monkeypatch.setenv("MLFLOW_NESTED_RUN", "yes")
    monkeypatch.setenv("MLFLOW_TAGS", '{"team": "vision"}')
    import mlflow

    tracker = MLflowTracker("exp", logging_dir=tmp_path)
    tracker.start()  # sets the store of the directory
    child_id = tracker.run_id
    tracker.finish()
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert client.get_run(child_id).data.tags["team"] == "vision"

    with mlflow.start_run(experiment_id=client.get_run(child_id).info.experiment_id) as parent:
        nested = MLflowTracker("exp", logging_dir=tmp_path)
        nested.start()
        nested_id = nested.run_id
        nested.finish()
    run = client.get_run(nested_id)
    assert run.data.tags["mlflow.parentRunId"] == parent.info.run_id
    assert run.info.status == "FINISHED"


@needs("dvclive")
def test_dvclive_logs_strings_as_metrics_and_skips_none(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVCLIVE_LOGLEVEL", "ERROR")
    from dvclive.utils import parse_metrics

    tracker = DVCLiveTracker(dir=str(tmp_path / "live"), save_dvc_exp=False, dvcyaml=None)
    values = {"loss": 0.1, "phase": "warmup", "missing": None}
    tracker.log(values)
    tracker.log(values, step=3)
    tracker.finish()
    logs, latest = parse_metrics(tracker.live)
    assert latest == {"step": 3, "loss": 0.1, "phase": "warmup"}
    phase = next(rows for path, rows in logs.items() if path.endswith("phase.tsv"))
    assert [(row["step"], row["phase"]) for row in phase] == [("0", "warmup"), ("3", "warmup")]


@needs("aim")
def test_aim_repo_keyword_names_the_repository(tmp_path):
    from aim import Repo

    tracker = AimTracker("proj", repo=str(tmp_path / "repo"), system_tracking_interval=None)
    assert tracker.logging_dir == str(tmp_path / "repo")
    tracker.log({"loss": 0.5}, step=0)
    run_hash = tracker.tracker.hash
    tracker.finish()
    assert list(Repo.from_path(str(tmp_path / "repo")).list_all_runs()) == [run_hash]


def test_aim_repo_and_another_logging_dir_are_refused(tmp_path):
    with pytest.raises(ValueError, match=r"logging_dir='.*a' and repo='.*b'\. Pass only one"):
        AimTracker("proj", logging_dir=tmp_path / "a", repo=tmp_path / "b")
    assert AimTracker("proj", logging_dir=tmp_path, repo=tmp_path).logging_dir == str(tmp_path)

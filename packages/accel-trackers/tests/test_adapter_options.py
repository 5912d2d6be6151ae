"""Options of the adapters that the reference library also reads: environment variables, aliases."""

import importlib.util
import json

import pytest

from accel_trackers import AimTracker, DVCLiveTracker, MLflowTracker, init_trackers


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

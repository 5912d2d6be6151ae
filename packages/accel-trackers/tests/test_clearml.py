"""The ClearML adapter against the real library in offline mode, read back from the session files."""

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
import zipfile

import pytest

from accel_trackers import ClearMLTracker, init_trackers

np = pytest.importorskip("numpy")
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("clearml") is None,
    reason="clearml is not installed here; install it with: pip install 'accel-trackers[clearml]'",
)

_FRAMEWORKS = (
    "matplotlib tensorflow tensorboard pytorch xgboost scikit fastai lightgbm hydra "
    "detect_repository tfdefines joblib megengine catboost gradio jsonargparse"
).split()
# No framework hooks, and no scan of the repository and its packages (the test of the repository
# detection below keeps it on).
QUIET = {
    "offline": True,
    "auto_connect_frameworks": dict.fromkeys(_FRAMEWORKS, False),
    "auto_resource_monitoring": False,
    "auto_connect_arg_parser": False,
    "auto_connect_streams": False,
}
CONFIG = {
    "lr": np.float32(0.5),
    "epochs": 3,
    "optimizer": {"name": "adamw", "betas": [0.9, 0.99]},
    "scheduler": None,
}


@pytest.fixture(autouse=True)
def _offline_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("CLEARML_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("CLEARML_OFFLINE_MODE", "1")


def _session(task):
    """(task.json, metric events) of a closed offline task."""
    with zipfile.ZipFile(str(task.get_offline_mode_folder()) + ".zip") as zf:
        task_json = json.loads(zf.read("task.json"))
        lines = (
            zf.read("metrics.jsonl").decode().splitlines()
            if "metrics.jsonl" in zf.namelist()
            else []
        )
        names = zf.namelist()
    events = [e for line in lines if line.strip() for e in json.loads(line)]
    return task_json, events, names


@pytest.mark.timeout(150)
def test_config_values_and_series(monkeypatch):
    from clearml.utilities.config import text_to_config_dict

    trackers = init_trackers(
        "clearml", "proj", config=CONFIG, init_kwargs={"clearml": {**QUIET, "task_name": "t1"}}
    )
    task = trackers.get("clearml", unwrap=True)
    trackers.log({"loss": np.float64(1.5), "eval_loss": 2.0, "val/acc": 0.5, "skip": None}, step=1)
    trackers.log({"train": {"acc": 0.75}}, step=2)
    trackers.log({"final": 0.125})  # no step: a single value
    trackers.finish()
    task_json, events, _ = _session(task)
    scalars = {
        (e["metric"], e["variant"], e["iter"], e["value"])
        for e in events
        if e.get("type") == "training_stats_scalar"
    }
    # An unprefixed key is the "train" line of its graph, as in the reference library; a known
    # prefix (with "_" or "/") names the line.
    assert ("loss", "train", 1, 1.5) in scalars and ("loss", "eval", 1, 2.0) in scalars
    assert ("acc", "val", 1, 0.5) in scalars and ("acc", "train", 2, 0.75) in scalars
    assert any(m == "Summary" and v == "final" and val == 0.125 for m, v, _, val in scalars)
    assert not any(e.get("metric") == "skip" for e in events)
    general = text_to_config_dict(task_json["configuration"]["General"]["value"])
    assert general == {
        "lr": 0.5,
        "epochs": 3,
        "optimizer": {"name": "adamw", "betas": [0.9, 0.99]},
        "scheduler": None,
    }
    hparams = task_json["hyperparams"]["hparams"]
    assert hparams["lr"]["value"] == "0.5" and hparams["optimizer/name"]["value"] == "adamw"
    assert task_json["project_name"] == "proj" and task_json["name"] == "t1"


@pytest.mark.timeout(150)
def test_images_one_or_a_list_per_key_and_tables():
    pd = pytest.importorskip("pandas")
    tracker = ClearMLTracker("proj", **QUIET)
    tracker.start()
    eye = np.eye(32, dtype=np.uint8) * 255
    tracker.log_images({"eval_sample": eye, "grid": [eye, np.stack([eye] * 3, axis=-1)]}, step=1)
    tracker.log_table("with columns", columns=["A", "B"], data=[[1, 3], [2, 4]])
    tracker.log_table("header first", data=[["C", "D"], [5, 7], [6, 8]], step=2)
    tracker.log_table("frame", dataframe=pd.DataFrame({"E": [9, 10]}))
    task = tracker.tracker
    tracker.finish()
    _, events, names = _session(task)
    images = [n for n in names if n.endswith((".jpeg", ".png"))]
    assert len(images) == 3
    image_series = {
        (e["metric"], e["variant"]) for e in events if e.get("type") == "training_debug_image"
    }
    assert image_series == {("sample", "eval"), ("grid", "train/0"), ("grid", "train/1")}
    tables = {e["metric"]: json.loads(e["plot_str"])["data"][0] for e in events if "plot_str" in e}
    assert tables["with columns"]["header"]["values"] == ["A", "B"]
    assert tables["with columns"]["cells"]["values"] == [[1, 2], [3, 4]]
    assert tables["header first"]["header"]["values"] == ["C", "D"]
    assert tables["header first"]["cells"]["values"] == [[5, 6], [7, 8]]
    assert tables["frame"]["cells"]["values"][-1] == [9, 10]


def test_table_without_rows_is_refused_before_any_task_starts():
    tracker = ClearMLTracker("proj", **QUIET)
    with pytest.raises(ValueError, match=r"log_table\('t'\) needs the rows: got dataframe=None"):
        tracker.log_table("t", columns=["A"])
    from clearml import Task

    assert Task.current_task() is None  # the refused call started no task
    tracker.finish()


_TWO_TASKS = textwrap.dedent(
    """
    import sys
    from accel_trackers import ClearMLTracker

    for index in range(3):
        # Repository detection stays on: it is what races with ClearML's reporting process.
        tracker = ClearMLTracker(f"proj{index}", offline=True)
        tracker.start()
        tracker.log({"loss": 1.0 + index}, step=1)
        tracker.finish()
        print("closed", index, flush=True)
    """
)


@pytest.mark.timeout(280)
def test_second_task_of_a_process_ends_without_waiting_for_repository_detection(tmp_path):
    # ClearML's own close() waits 300 s for a repository detection that its forked reporting
    # process can block; before the adapter reported from threads, the second task hit it.
    env = {**os.environ, "CLEARML_CACHE_DIR": str(tmp_path)}
    env.pop("CLEARML_CONFIG_FILE", None)
    done = subprocess.run(
        [sys.executable, "-c", _TWO_TASKS],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert [line for line in done.stdout.splitlines() if line.startswith("closed")] == [
        "closed 0",
        "closed 1",
        "closed 2",
    ]


_CONFIGURED = textwrap.dedent(
    """
    import clearml
    from accel_trackers.backends._clearml import _report_from_threads_unless_configured

    _report_from_threads_unless_configured(clearml)
    print("subprocess reporting:", bool(clearml.Task._report_subprocess_enabled))
    """
)


@pytest.mark.parametrize(("setting", "expected"), [("", "False"), ("true", "True")])
def test_reporting_setting_of_the_configuration_is_kept(tmp_path, setting, expected):
    conf = tmp_path / "clearml.conf"
    line = f"sdk.development.report_use_subprocess: {setting}\n" if setting else ""
    conf.write_text(line + "sdk.development.vcs_repo_detect_async: true\n")
    env = {**os.environ, "CLEARML_CONFIG_FILE": str(conf), "CLEARML_CACHE_DIR": str(tmp_path)}
    done = subprocess.run(
        [sys.executable, "-c", _CONFIGURED],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"subprocess reporting: {expected}" in done.stdout

"""Each adapter against its real library in offline / local mode, read back from disk."""

import glob
import importlib.util
import json
import os
import sqlite3
import struct
import subprocess
import sys
import textwrap
import time
import zipfile

import pytest

from accel_trackers import LoggerType, SwanLabTracker, TrackioTracker, init_trackers

np = pytest.importorskip("numpy")


def needs(module: str):
    """Skip marker for a test that needs the backend package `module`."""
    return pytest.mark.skipif(
        importlib.util.find_spec(module) is None,
        reason=f"{module} is not installed here; install the accel-trackers extra that "
        "provides it, or run `uv sync --all-packages --group test`",
    )


CONFIG = {
    "lr": np.float32(0.5),
    "epochs": 3,
    "optimizer": {"name": "adamw", "betas": [0.9, 0.99]},
    "scheduler": None,
}


def _log_two_steps(trackers):
    trackers.log({"loss": np.float64(1.5), "train": {"acc": 0.25}, "skip_me": None}, step=1)
    trackers.log({"loss": 0.5, "train": {"acc": 0.75}}, step=2)
    trackers.finish()
    trackers.finish()  # harmless


@needs("tensorboardX")
@needs("tensorboard")
def test_tensorboard_event_files(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from tensorboard.plugins.hparams import plugin_data_pb2

    trackers = init_trackers("tensorboard", "run", config=CONFIG, logging_dir=tmp_path)
    trackers.log({"note": "hello"}, step=0)
    _log_two_steps(trackers)
    acc = EventAccumulator(str(tmp_path / "run"))
    acc.Reload()
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(1, 1.5), (2, 0.5)]
    assert [(e.step, e.value) for e in acc.Scalars("train/acc")] == [(1, 0.25), (2, 0.75)]
    assert "skip_me" not in acc.Tags()["scalars"]
    session = plugin_data_pb2.HParamsPluginData.FromString(
        acc.PluginTagToContent("hparams")["_hparams_/session_start_info"]
    ).session_start_info.hparams
    assert session["lr"].number_value == 0.5
    assert session["optimizer/name"].string_value == "adamw"
    assert session["scheduler"].string_value == "None"
    saved = json.loads((tmp_path / "run" / "hparams.json").read_text())
    assert saved["optimizer"] == {"name": "adamw", "betas": [0.9, 0.99]}


def _wandb_records(path):
    """Records of a W&B transaction log (LevelDB log format behind a ':W&B' header)."""
    from wandb.proto import wandb_internal_pb2

    data = open(path, "rb").read()
    assert data[:4] == b":W&B"
    pos, block, records, pending = 7, 32768, [], b""
    while pos + 7 <= len(data):
        if block - pos % block < 7:
            pos += block - pos % block
            continue
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk = data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind == 0:
            break
        pending = chunk if kind in (1, 2) else pending + chunk
        if kind in (1, 4):
            rec = wandb_internal_pb2.Record()
            rec.ParseFromString(pending)
            records.append(rec)
    return records


@needs("wandb")
def test_wandb_offline_run_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    trackers = init_trackers(
        "wandb", "proj", config=CONFIG, logging_dir=tmp_path, init_kwargs={"wandb": {}}
    )
    trackers.log({"note": "hello"}, step=0)
    _log_two_steps(trackers)
    runs = glob.glob(str(tmp_path / "wandb" / "offline-run-*"))
    assert len(runs) == 1
    (log_file,) = glob.glob(os.path.join(runs[0], "run-*.wandb"))
    # `run.finish()` returns once wandb's service process has the run; that process may write
    # the transaction log a moment later, so read it once it ends with the exit record.
    deadline = time.monotonic() + 60
    records = _wandb_records(log_file)
    while not any(r.WhichOneof("record_type") == "exit" for r in records):
        assert time.monotonic() < deadline, f"{log_file} never got its exit record"
        time.sleep(0.2)
        records = _wandb_records(log_file)
    history, config = [], {}
    for rec in records:
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            history.append(
                {
                    i.nested_key[0] if i.nested_key else i.key: json.loads(i.value_json)
                    for i in rec.history.item
                }
            )
        elif kind in ("run", "config"):
            updates = rec.run.config.update if kind == "run" else rec.config.update
            for item in updates:
                config[item.key or item.nested_key[0]] = json.loads(item.value_json)
    logged = [(h["_step"], h.get("loss"), h.get("train/acc")) for h in history if "loss" in h]
    assert logged == [(1, 1.5, 0.25), (2, 0.5, 0.75)]
    assert any(h.get("note") == "hello" for h in history)
    assert not any("skip_me" in h for h in history)

    def val(v):
        return v["value"] if isinstance(v, dict) and "value" in v else v

    assert val(config["lr"]) == 0.5
    assert val(config["optimizer"]) == {"name": "adamw", "betas": [0.9, 0.99]}
    assert val(config["scheduler"]) is None


@needs("comet_ml")
def test_comet_offline_archive(tmp_path, monkeypatch):
    monkeypatch.setenv("COMET_OFFLINE_DIRECTORY", str(tmp_path))
    monkeypatch.setenv("COMET_DISABLE_AUTO_LOGGING", "1")
    trackers = init_trackers(
        "comet_ml", "proj", config=CONFIG, init_kwargs={"comet_ml": {"online": False}}
    )
    trackers.log({"note": "hello"}, step=0)
    _log_two_steps(trackers)
    (archive,) = glob.glob(str(tmp_path / "*.zip"))
    messages = []
    with zipfile.ZipFile(archive) as zf:
        for name in zf.namelist():
            if name.endswith(".json") or name.endswith(".jsonl"):
                for line in zf.read(name).decode().splitlines():
                    if line.strip():
                        messages.append(json.loads(line))
    text = json.dumps(messages)
    metrics = [
        m["payload"]["metric"]
        for m in messages
        if isinstance(m, dict) and "metric" in m.get("payload", {})
    ]
    loss = [(m["step"], float(m["metricValue"])) for m in metrics if m["metricName"] == "loss"]
    assert loss == [(1, 1.5), (2, 0.5)]
    assert "train/acc" in text and "skip_me" not in text
    params = {
        m["payload"]["param"]["paramName"]: m["payload"]["param"]["paramValue"]
        for m in messages
        if isinstance(m, dict) and "param" in m.get("payload", {})
    }
    assert float(params["lr"]) == 0.5 and params["optimizer/name"] == "adamw"
    assert params["scheduler"] == "None"
    assert "hello" in text


@needs("dvclive")
def test_dvclive_files(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DVCLIVE_LOGLEVEL", "ERROR")
    out = tmp_path / "live"
    trackers = init_trackers(
        "dvclive",
        "proj",
        config=CONFIG,
        logging_dir=out,
        init_kwargs={"dvclive": {"save_dvc_exp": False}},
    )
    _log_two_steps(trackers)
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["loss"] == 0.5 and metrics["train"]["acc"] == 0.75
    rows = (out / "plots" / "metrics" / "loss.tsv").read_text().splitlines()
    assert rows[0].split("\t") == ["step", "loss"]
    assert [r.split("\t") for r in rows[1:]] == [["1", "1.5"], ["2", "0.5"]]
    params = (out / "params.yaml").read_text()
    assert "lr: 0.5" in params and "name: adamw" in params


@needs("mlflow")
def test_mlflow_local_store(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    import mlflow

    long_value = "x" * 10000
    trackers = init_trackers(
        "mlflow", "proj", config={**CONFIG, "long": long_value}, logging_dir=tmp_path
    )
    run_id = trackers.get("mlflow").run_id
    _log_two_steps(trackers)
    client = mlflow.MlflowClient(f"sqlite:///{tmp_path / 'mlflow.db'}")
    run = client.get_run(run_id)
    assert run.info.status == "FINISHED"
    assert client.get_experiment(run.info.experiment_id).name == "proj"
    history = client.get_metric_history(run_id, "loss")
    assert sorted((m.step, m.value) for m in history) == [(1, 1.5), (2, 0.5)]
    assert [m.value for m in client.get_metric_history(run_id, "train/acc")] == [0.25, 0.75]
    params = run.data.params
    assert params["lr"] == "0.5" and params["optimizer/name"] == "adamw"
    assert params["scheduler"] == "None"
    assert 0 < len(params["long"]) < len(long_value)  # truncated, with a warning
    assert "skip_me" not in run.data.metrics


@needs("aim")
def test_aim_local_repo(tmp_path):
    from aim import Repo, Run
    from aim.sdk.index_manager import RepoIndexManager

    trackers = init_trackers(
        "aim",
        "proj",
        config=CONFIG,
        logging_dir=tmp_path,
        init_kwargs={
            "aim": {
                "system_tracking_interval": None,
                "log_system_params": False,
                "capture_terminal_logs": False,
            }
        },
    )
    run_hash = trackers.get("aim", unwrap=True).hash
    trackers.log({"note": "hello"}, step=0)
    _log_two_steps(trackers)
    repo = Repo.from_path(str(tmp_path))
    assert list(repo.list_all_runs()) == [run_hash]
    RepoIndexManager.get_index_manager(repo).index(run_hash)
    run = Run(run_hash=run_hash, repo=str(tmp_path), read_only=True)
    hparams = run.get("hparams")
    assert hparams["lr"] == 0.5 and hparams["optimizer"]["name"] == "adamw"
    assert hparams["scheduler"] == "None"
    series = {
        m.name: (
            list(m.indices_list()) if hasattr(m, "indices_list") else None,
            list(m.values.values_list()),
        )
        for m in run.metrics()
    }
    assert series["loss"][1] == [1.5, 0.5]
    assert series["train/acc"][1] == [0.25, 0.75]
    assert "skip_me" not in series


SWAN_CONFIG = {"lr": np.float32(0.5), "optimizer": {"name": "adamw"}, "scheduler": None}


def test_names_and_signatures_are_the_references():
    assert LoggerType.SWANLAB == "swanlab" and LoggerType.TRACKIO == "trackio"
    for cls in (SwanLabTracker, TrackioTracker):
        tracker = cls("proj", mode="x")
        assert (tracker.run_name, tracker.init_kwargs) == ("proj", {"mode": "x"})
        assert tracker.requires_logging_directory is False


def _swanlab_records(run_dir):
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    reader = DataStoreReader()
    reader.open(glob.glob(os.path.join(run_dir, "*.swanlab"))[0])
    records = []
    for raw in reader:
        record = Record()
        record.ParseFromString(raw)
        records.append(record)
    reader.close()
    return records


@needs("swanlab")
def test_swanlab_offline_run_folder(tmp_path, monkeypatch):
    import yaml

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    trackers = init_trackers(
        "swanlab",
        "proj",
        config=SWAN_CONFIG,
        init_kwargs={"swanlab": {"mode": "offline"}},
        logging_dir=tmp_path / "logs",
    )
    tracker = trackers.get("swanlab")
    trackers.log({"loss": np.float64(1.5), "train": {"acc": 0.25}, "skip_me": None}, step=1)
    trackers.log({"loss": 0.5, "note": "hello"}, step=2)
    tracker.log_images({"sample": [np.zeros((4, 4, 3), dtype=np.uint8)]}, step=2)
    trackers.finish()
    trackers.finish()  # harmless

    (run_dir,) = glob.glob(str(tmp_path / "logs" / "run-*"))
    config = yaml.safe_load(open(os.path.join(run_dir, "files", "config.yaml")))
    assert config["lr"]["value"] == 0.5
    assert config["optimizer"]["value"] == {"name": "adamw"}
    assert "scheduler" in config  # SwanLab keeps a None value as an empty mapping
    records = _swanlab_records(run_dir)
    assert records[0].start.project == "proj"
    scalars = [
        (r.scalar.key, r.scalar.step, r.scalar.value.number)
        for r in records
        if r.HasField("scalar")
    ]
    assert scalars == [("loss", 1, 1.5), ("train/acc", 1, 0.25), ("loss", 2, 0.5)]
    media = {r.media.key: r.media.step for r in records if r.HasField("media")}
    assert media == {"note": 2, "sample": 2}
    assert len(glob.glob(os.path.join(run_dir, "media", "image", "*.png"))) == 1
    assert records[-1].HasField("finish")


_TRACKIO_SCRIPT = textwrap.dedent(
    """
    import numpy as np
    from accel_trackers import init_trackers

    trackers = init_trackers(
        "trackio",
        "proj",
        config={"lr": np.float32(0.5), "optimizer": {"name": "adamw"}},
        init_kwargs={"trackio": {"name": "first"}},
    )
    trackers.log({"loss": np.float64(1.5), "train": {"acc": 0.25}, "skip_me": None}, step=1)
    trackers.log({"loss": 0.5, "note": "hello"}, step=2)
    trackers.finish()
    trackers.finish()
    """
)


@needs("trackio")
def test_trackio_local_database(tmp_path):
    # Trackio reads TRACKIO_DIR when it is imported: the run happens in a child process.
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("TRACKIO_", "HF_TOKEN")) and key not in ("RANK", "LOCAL_RANK")
    }
    env.update(
        TRACKIO_DIR=str(tmp_path / "trackio"),
        HOME=str(tmp_path / "home"),
        HF_HOME=str(tmp_path / "hf"),
        HF_HUB_OFFLINE="1",
    )
    done = subprocess.run(
        [sys.executable, "-c", _TRACKIO_SCRIPT],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=180,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Running on" not in done.stdout + done.stderr  # no dashboard server started
    db = sqlite3.connect(tmp_path / "trackio" / "proj.db")
    rows = db.execute("select run_name, step, metrics from metrics order by step").fetchall()
    assert [(name, step, json.loads(m)) for name, step, m in rows] == [
        ("first", 1, {"loss": 1.5, "train/acc": 0.25}),
        ("first", 2, {"loss": 0.5, "note": "hello"}),
    ]
    (config,) = [json.loads(c) for (c,) in db.execute("select config from configs")]
    assert config["lr"] == 0.5 and config["optimizer"] == {"name": "adamw"}
    db.close()

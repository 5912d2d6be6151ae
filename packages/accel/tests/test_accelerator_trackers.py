"""`log_with="swanlab"` / `"trackio"` through the Accelerator, read back from the backend's files."""

import glob
import importlib.util
import os

import pytest

from accel import Accelerator
from accel.tracking import LOGGER_TYPE_TO_CLASS, SwanLabTracker, TrackioTracker


@pytest.mark.skipif(
    importlib.util.find_spec("swanlab") is None,
    reason="needs SwanLab (pip install 'accel-trackers[swanlab]')",
)
def test_log_with_swanlab_writes_an_offline_run_under_the_project_dir(tmp_path, monkeypatch):
    from swanlab.proto.swanlab.record.v1.record_pb2 import Record
    from swanlab.sdk.internal.core_python.store import DataStoreReader

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    accelerator = Accelerator(cpu=True, log_with="swanlab", project_dir=str(tmp_path / "proj"))
    accelerator.init_trackers(
        "demo", config={"lr": 0.1}, init_kwargs={"swanlab": {"mode": "offline"}}
    )
    assert isinstance(accelerator.get_tracker("swanlab"), SwanLabTracker)
    accelerator.log({"loss": 0.25}, step=3)
    accelerator.end_training()

    (run_file,) = glob.glob(str(tmp_path / "proj" / "**" / "run-*.swanlab"), recursive=True)
    reader = DataStoreReader()
    reader.open(run_file)
    scalars = []
    for raw in reader:
        record = Record()
        record.ParseFromString(raw)
        if record.HasField("scalar"):
            scalars.append((record.scalar.key, record.scalar.step, record.scalar.value.number))
    reader.close()
    assert scalars == [("loss", 3, 0.25)]
    assert os.path.isfile(os.path.join(os.path.dirname(run_file), "files", "config.yaml"))


def test_trackio_and_swanlab_are_known_names():
    assert LOGGER_TYPE_TO_CLASS["trackio"] is TrackioTracker
    assert LOGGER_TYPE_TO_CLASS["swanlab"] is SwanLabTracker

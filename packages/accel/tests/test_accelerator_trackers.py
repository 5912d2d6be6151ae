"""`log_with="swanlab"` / `"trackio"` through the Accelerator, read back from the backend's files."""

import glob
import importlib.util
import os

import pytest
from accel_state import AcceleratorState, PartialState

from accel import Accelerator
from accel.tracking import (
    LOGGER_TYPE_TO_CLASS,
    AimTracker,
    ClearMLTracker,
    CometMLTracker,
    DVCLiveTracker,
    GeneralTracker,
    MLflowTracker,
    SwanLabTracker,
    TensorBoardTracker,
    TrackioTracker,
    WandBTracker,
    on_main_process,
    register_tracker_class,
)


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


class _Counting(GeneralTracker):
    name = "counting"
    requires_logging_directory = False

    def __init__(self, main_process_only):
        super().__init__()
        self.main_process_only = main_process_only
        self.calls = 0

    @on_main_process
    def log(self, values, step=None, **kwargs):
        """Count the calls."""
        self.calls += 1
        return "ran"


def test_on_main_process_reads_the_tracker_setting_at_call_time():
    AcceleratorState._reset_state(reset_partial_state=True)
    anywhere = _Counting(main_process_only=False)
    assert anywhere.log({}) == "ran" and anywhere.calls == 1
    assert not PartialState._shared_state  # no process state was needed, none was created
    assert _Counting.log.__doc__ == "Count the calls."
    main_only = _Counting(main_process_only=True)
    assert main_only.log({}) == "ran" and main_only.calls == 1  # one process: the main one
    assert PartialState().is_main_process
    AcceleratorState._reset_state(reset_partial_state=True)


class _Registered(GeneralTracker):
    name = "registered_recorder"
    requires_logging_directory = False

    def __init__(self, run_name, **kwargs):
        super().__init__()
        self.run_name, self.kwargs, self.logged = run_name, kwargs, []

    def log(self, values, step=None, **kwargs):
        self.logged.append((values, step))


def test_registered_tracker_class_is_usable_by_name_in_log_with():
    register_tracker_class(_Registered)
    try:
        accelerator = Accelerator(cpu=True, log_with="registered_recorder")
        accelerator.init_trackers("proj", init_kwargs={"registered_recorder": {"tag": "x"}})
        tracker = accelerator.get_tracker("registered_recorder")
        assert isinstance(tracker, _Registered)
        assert (tracker.run_name, tracker.kwargs) == ("proj", {"tag": "x"})
        accelerator.log({"loss": 0.5}, step=2)
        assert tracker.logged == [({"loss": 0.5}, 2)]
        accelerator.end_training()
    finally:
        LOGGER_TYPE_TO_CLASS.pop("registered_recorder")
        AcceleratorState._reset_state(reset_partial_state=True)


_BUILT_BEFORE_THE_STATE = {
    "tensorboard": lambda d: TensorBoardTracker(run_name="tb", logging_dir=d),
    "wandb": lambda d: WandBTracker(run_name="wb", mode="offline", dir=d),
    "trackio": lambda d: TrackioTracker(run_name="tio"),
    "comet_ml": lambda d: CometMLTracker(run_name="comet", online=False),
    "aim": lambda d: AimTracker(run_name="aim", repo=d),
    "mlflow": lambda d: MLflowTracker(experiment_name="mlf", logging_dir=d),
    "clearml": lambda d: ClearMLTracker(run_name="cml"),
    "dvclive": lambda d: DVCLiveTracker(dir=d),
    "swanlab": lambda d: SwanLabTracker(run_name="swan", mode="offline", log_dir=d),
}


@pytest.mark.parametrize("name", sorted(_BUILT_BEFORE_THE_STATE))
def test_tracker_built_before_the_state_and_after_a_partial_reset(name, tmp_path):
    # An Accelerator has run, then only its PartialState is reset (the reference's own test
    # does this): the tracker is built with no process state, and the next Accelerator builds
    # one from its own arguments.
    Accelerator(cpu=True, mixed_precision="bf16")
    PartialState._reset_state()
    tracker = _BUILT_BEFORE_THE_STATE[name](str(tmp_path / "out"))
    assert PartialState._shared_state == {}  # building a tracker reads no process state ...
    assert not (tmp_path / "out").exists()  # ... and starts no run
    accelerator = Accelerator(cpu=True, log_with=tracker)
    assert PartialState._shared_state != {} and accelerator.num_processes == 1
    assert accelerator.mixed_precision == "no"  # the reset state's "bf16" went with it
    assert accelerator.trackers == [] and not (tmp_path / "out").exists()  # runs start later

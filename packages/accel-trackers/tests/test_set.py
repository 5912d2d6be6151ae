import pytest

from accel_trackers import (
    LOGGER_TYPE_TO_CLASS,
    GeneralTracker,
    NoOpTracker,
    init_trackers,
    register_tracker,
    resolve_main_process,
)


class Recorder(GeneralTracker):
    """A third-party tracker that keeps every call in memory."""

    name = "recorder"
    requires_logging_directory = False

    def __init__(self, run_name, logging_dir=None, fail_finish=False, **kwargs):
        super().__init__()
        self.run_name = run_name
        self.logging_dir = logging_dir
        self.fail_finish = fail_finish
        self.calls = []

    @property
    def tracker(self):
        return self.calls

    def start(self):
        self.calls.append(("start",))

    def store_init_configuration(self, values):
        self.calls.append(("config", values))

    def log(self, values, step=None, **kwargs):
        self.calls.append(("log", values, step, kwargs))

    def finish(self):
        self.calls.append(("finish",))
        if self.fail_finish:
            raise RuntimeError("run already finished")


class EveryRank(Recorder):
    name = "every_rank"
    main_process_only = False


@pytest.fixture
def registered():
    register_tracker("recorder", Recorder)
    register_tracker("every_rank", EveryRank)
    yield
    LOGGER_TYPE_TO_CLASS.pop("recorder")
    LOGGER_TYPE_TO_CLASS.pop("every_rank")


def test_main_process_resolution(monkeypatch):
    assert resolve_main_process() is True
    assert resolve_main_process(process_index=1) is False
    assert resolve_main_process(is_main_process=True, process_index=1) is True
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert resolve_main_process() is False
    monkeypatch.setenv("RANK", "0")
    assert resolve_main_process() is True  # RANK wins over LOCAL_RANK
    monkeypatch.setenv("RANK", "zero")
    with pytest.raises(ValueError, match=r"RANK must be an integer.*'zero'"):
        resolve_main_process()


def test_main_process_logs_config_and_values(registered, tmp_path):
    trackers = init_trackers(
        "recorder",
        "proj",
        config={"lr": 0.1},
        init_kwargs={"recorder": {"fail_finish": False}},
        logging_dir=tmp_path,
    )
    rec = trackers.get("recorder")
    assert rec.run_name == "proj" and rec.logging_dir == tmp_path  # logging_dir by keyword
    trackers.log({"loss": 1.0}, step=3, log_kwargs={"recorder": {"commit": False}})
    trackers.finish()
    trackers.finish()
    assert rec.calls == [
        ("start",),
        ("config", {"lr": 0.1}),
        ("log", {"loss": 1.0}, 3, {"commit": False}),
        ("finish",),
    ]
    assert trackers.get("recorder", unwrap=True) is rec.calls
    with pytest.raises(ValueError, match=r"No tracker named 'wandb'.*\['recorder'\]"):
        trackers.get("wandb")


def test_other_ranks_get_harmless_stand_ins(registered, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    trackers = init_trackers(["recorder", "every_rank"], "proj", config={"lr": 0.1})
    stand_in = trackers.get("recorder")
    assert isinstance(stand_in, NoOpTracker)
    # Every access and call on the stand-in, or on its native object, is harmless.
    stand_in.log({"a": 1}, step=1)
    stand_in.log_images({}, step=1)
    stand_in.tracker.log_artifact("x").whatever(1, k=2)
    stand_in.anything_at_all()
    assert not stand_in.tracker
    assert isinstance(trackers.get("wandb"), NoOpTracker)  # never started here: still safe
    trackers.get("wandb", unwrap=True).log({"a": 1})
    # A tracker that asks to run on every process does.
    every = trackers.get("every_rank")
    trackers.log({"loss": 2.0}, step=1)
    trackers.finish()
    assert [c[0] for c in every.calls] == ["start", "config", "log", "finish"]


def test_user_instance_is_not_started_on_other_ranks(registered):
    inst = Recorder("mine")
    trackers = init_trackers([inst], "proj", is_main_process=False)
    trackers.log({"loss": 1.0})
    trackers.finish()
    assert inst.calls == []
    trackers = init_trackers([inst], "proj", is_main_process=True)
    trackers.log({"loss": 1.0})
    assert [c[0] for c in inst.calls] == ["start", "log"]


def test_finish_survives_a_backend_that_raises(registered, caplog):
    trackers = init_trackers("recorder", "proj", init_kwargs={"recorder": {"fail_finish": True}})
    trackers.finish()
    trackers.end_training()
    assert "finish() raised RuntimeError('run already finished')" in caplog.text
    assert [c[0] for c in trackers.get("recorder").calls] == ["start", "finish"]


def test_blank_general_tracker_is_a_no_op():
    blank = GeneralTracker(_blank=True)
    blank.log({"a": 1})
    blank.some_backend_method(1, 2)
    blank.tracker.finish()
    with pytest.raises(AttributeError):
        GeneralTracker().some_backend_method  # noqa: B018

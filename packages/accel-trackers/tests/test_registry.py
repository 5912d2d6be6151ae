import pytest

import accel_trackers
from accel_trackers import (
    LOGGER_TYPE_TO_CLASS,
    GeneralTracker,
    LoggerType,
    filter_trackers,
    get_available_trackers,
    init_trackers,
    register_tracker,
    register_tracker_class,
)
from accel_trackers._tracker_interface import BackendTracker


def test_logger_type_values():
    assert {m.name: m.value for m in LoggerType} == {
        "ALL": "all",
        "TENSORBOARD": "tensorboard",
        "WANDB": "wandb",
        "COMETML": "comet_ml",
        "DVCLIVE": "dvclive",
        "MLFLOW": "mlflow",
        "AIM": "aim",
        "CLEARML": "clearml",
        "SWANLAB": "swanlab",
        "TRACKIO": "trackio",
    }
    assert LoggerType("wandb") == "wandb"


def test_all_means_every_installed_backend(tmp_path):
    resolved = filter_trackers("all", logging_dir=tmp_path)
    assert [str(r) for r in resolved] == get_available_trackers()


def test_explicit_names_and_enum_members_dedupe(tmp_path):
    if "tensorboard" not in get_available_trackers():
        pytest.skip("tensorboardX is not installed")
    resolved = filter_trackers(["tensorboard", LoggerType.TENSORBOARD, "TensorBoard"], tmp_path)
    assert resolved == [LoggerType.TENSORBOARD]


def test_directory_backend_without_logging_dir_is_a_clear_error():
    if "tensorboard" not in get_available_trackers():
        pytest.skip("tensorboardX is not installed")
    # The reference's words come first (code that matches them keeps working), then the value
    # and the fix.
    with pytest.raises(
        ValueError,
        match=r"^Logging with `tensorboard` requires a `logging_dir`: .*'tensorboard'.*"
        r"logging_dir is None.*logging_dir=",
    ):
        filter_trackers("tensorboard")


def test_unknown_name_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"Unknown tracker 'tensorbord'.*register_tracker"):
        filter_trackers("tensorbord")


class _Missing(BackendTracker):
    name = "missing_backend"
    _module = "accel_no_such_backend_pkg"
    _extra = "missing"

    def __init__(self, run_name, **kwargs):
        super().__init__()

    def _open(self):
        return self._backend()


def test_missing_backend_names_the_install_command():
    register_tracker("missing_backend", _Missing)
    try:
        with pytest.raises(ImportError, match=r'pip install "accel-trackers\[missing\]"'):
            filter_trackers("missing_backend")
        # "all" skips what is not installed instead of failing.
        assert "missing_backend" not in [str(r) for r in filter_trackers("all", "x")]
        with pytest.raises(ImportError, match=r'pip install "accel-trackers\[missing\]"'):
            _Missing("r").start()
    finally:
        LOGGER_TYPE_TO_CLASS.pop("missing_backend")


class _Recorder(GeneralTracker):
    name = "recorder"
    requires_logging_directory = False

    def __init__(self, run_name, **kwargs):
        super().__init__()
        self.run_name = run_name


def test_register_tracker_rules():
    with pytest.raises(TypeError, match="subclass of GeneralTracker"):
        register_tracker("x", dict)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="other than 'all'"):
        register_tracker("all", _Recorder)
    with pytest.raises(ValueError, match="already registered"):
        register_tracker("wandb", _Recorder)
    register_tracker("recorder", _Recorder)
    try:
        assert filter_trackers(["recorder"]) == ["recorder"]
        assert "recorder" in get_available_trackers()
    finally:
        LOGGER_TYPE_TO_CLASS.pop("recorder")


class _DirRecorder(GeneralTracker):
    name = "dir_recorder"
    requires_logging_directory = True

    def __init__(self, run_name, logging_dir, **kwargs):
        super().__init__()
        self.run_name, self.logging_dir, self.kwargs = run_name, logging_dir, kwargs


def test_register_tracker_class_uses_the_class_name_and_builds_it(tmp_path):
    with pytest.raises(ValueError, match="subclass of GeneralTracker; got <class 'dict'>"):
        register_tracker_class(dict)  # type: ignore[arg-type]

    class _Nameless(GeneralTracker):
        pass

    with pytest.raises(ValueError, match=r"_Nameless\.name is ''.*name = 'my_tracker'"):
        register_tracker_class(_Nameless)
    register_tracker_class(_DirRecorder)
    try:
        with pytest.raises(ValueError, match="'dir_recorder' tracker writes to a directory"):
            filter_trackers("dir_recorder")
        trackers = init_trackers(
            "dir_recorder", "proj", init_kwargs={"dir_recorder": {"tag": 1}}, logging_dir=tmp_path
        )
        built = trackers.get("dir_recorder")
        assert isinstance(built, _DirRecorder)
        assert (built.run_name, built.logging_dir, built.kwargs) == ("proj", tmp_path, {"tag": 1})
        with pytest.warns(UserWarning, match="'dir_recorder' is already registered"):
            register_tracker_class(_DirRecorder)
    finally:
        LOGGER_TYPE_TO_CLASS.pop("dir_recorder")


def test_register_tracker_class_needs_the_directory_flag_set_by_the_class():
    class _NoFlag(GeneralTracker):
        name = "no_flag"

    with pytest.raises(ValueError) as info:
        register_tracker_class(_NoFlag)
    assert str(info.value) == (
        "A tracker class must set the class attribute `requires_logging_directory`; _NoFlag "
        "does not. Add requires_logging_directory = True if it needs a logging directory, or "
        "False otherwise."
    )
    assert "no_flag" not in LOGGER_TYPE_TO_CLASS

    class _Inherited(_DirRecorder):  # the flag of its own base counts
        name = "inherited_flag"

    register_tracker_class(_Inherited)
    LOGGER_TYPE_TO_CLASS.pop("inherited_flag")


def test_instances_pass_through_and_classes_are_refused():
    inst = _Recorder("r")
    assert filter_trackers([inst]) == [inst]
    with pytest.raises(TypeError, match="Pass an instance"):
        filter_trackers([_Recorder])


def test_public_names_are_exported():
    for name in accel_trackers.__all__:
        assert hasattr(accel_trackers, name), name


def test_each_builtin_backend_names_its_own_extra():
    from accel_trackers._registry import _extra_of

    assert _extra_of("comet_ml") == "comet"
    for name in (
        "tensorboard",
        "wandb",
        "dvclive",
        "mlflow",
        "aim",
        "clearml",
        "swanlab",
        "trackio",
    ):
        assert _extra_of(name) == name


def test_all_without_logging_dir_leaves_out_directory_trackers(caplog):
    with caplog.at_level("WARNING", logger="accel_trackers"):
        resolved = [str(r) for r in filter_trackers("all")]
    needs_dir = [
        n for n in get_available_trackers() if LOGGER_TYPE_TO_CLASS[n].requires_logging_directory
    ]
    assert resolved == [n for n in get_available_trackers() if n not in needs_dir]
    if needs_dir:
        assert f"log_with='all' leaves out {needs_dir}" in caplog.text
        assert "Pass project_dir=..." in caplog.text


def test_log_with_of_wrong_type_is_named():
    with pytest.raises(TypeError, match=r"got int \(3\)\. Pass e\.g\. log_with='tensorboard'"):
        filter_trackers(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"got float \(1\.5\)"):
        filter_trackers(["tensorboard", 1.5])  # type: ignore[list-item]

"""``Accelerator(...)`` refuses bad arguments at construction, naming the argument the user
passed, the value, and the fix."""

from __future__ import annotations

import sys

import pytest
from accel_trackers import GeneralTracker, LoggerType, get_available_trackers

from accel import Accelerator
from accel.utils import GradientAccumulationPlugin


class _Recorder(GeneralTracker):
    name = "recorder"
    requires_logging_directory = False

    def __init__(self) -> None:
        super().__init__()
        self.logged: list[dict] = []

    @property
    def tracker(self) -> object:
        return self

    def store_init_configuration(self, values: dict) -> None:
        self.logged.append(dict(values))

    def log(self, values: dict, step: int | None = None, **kwargs: object) -> None:
        self.logged.append(dict(values))


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0 (int)"), (-2, "-2 (int)"), (2.5, "2.5 (float)"), ("4", "'4' (str)"), (True, "True")],
)
def test_gradient_accumulation_steps_names_the_argument(value, shown):
    with pytest.raises(ValueError) as info:
        Accelerator(cpu=True, gradient_accumulation_steps=value)
    message = str(info.value)
    assert message.startswith(f"gradient_accumulation_steps must be an integer >= 1; got {shown}")
    assert "gradient_accumulation_steps=4, or 1 to step the optimizer on every batch" in message
    assert "num_steps" not in message  # the plugin field is not what the user wrote


def test_gradient_accumulation_steps_from_the_environment(monkeypatch):
    monkeypatch.setenv("ACCEL_GRADIENT_ACCUMULATION_STEPS", "3")
    assert Accelerator(cpu=True).gradient_accumulation_steps == 3


@pytest.mark.parametrize("raw", ["abc", "-1", "0", "2.5"])
def test_gradient_accumulation_steps_environment_value_is_checked(monkeypatch, raw):
    monkeypatch.setenv("ACCEL_GRADIENT_ACCUMULATION_STEPS", raw)
    with pytest.raises(ValueError) as info:
        Accelerator(cpu=True)
    assert str(info.value) == (
        f"environment variable ACCEL_GRADIENT_ACCUMULATION_STEPS must be an integer >= 1; "
        f"got {raw!r}. Set it to an integer >= 1, or unset it."
    )


@pytest.mark.parametrize("raw", ["abc", "0", "-5", "inf"])
def test_a_bad_checkpoint_timeout_fails_at_accelerator_creation(monkeypatch, raw):
    monkeypatch.setenv("ACCEL_CHECKPOINT_TIMEOUT", raw)
    with pytest.raises(ValueError) as info:
        Accelerator(cpu=True)
    assert str(info.value) == (
        f"environment variable ACCEL_CHECKPOINT_TIMEOUT must be a finite number > 0; got "
        f"{raw!r}. Set it to a finite number > 0, or unset it."
    )


def test_the_checkpoint_timeout_is_read_through_the_contract(monkeypatch):
    from accel._training_checkpoints.files._rendezvous import (
        DEFAULT_ARRIVAL_TIMEOUT,
        arrival_timeout,
    )

    monkeypatch.delenv("ACCEL_CHECKPOINT_TIMEOUT", raising=False)
    assert arrival_timeout() == DEFAULT_ARRIVAL_TIMEOUT
    monkeypatch.setenv("ACCEL_CHECKPOINT_TIMEOUT", " 0.25 ")
    assert arrival_timeout() == 0.25


def test_gradient_accumulation_steps_and_plugin_together():
    plugin = GradientAccumulationPlugin(num_steps=2)
    with pytest.raises(ValueError, match=r"got gradient_accumulation_steps=2 and .*num_steps"):
        Accelerator(cpu=True, gradient_accumulation_steps=2, gradient_accumulation_plugin=plugin)
    acc = Accelerator(cpu=True, gradient_accumulation_plugin=plugin)
    assert acc.gradient_accumulation_steps == 2


def test_unknown_tracker_fails_at_construction():
    with pytest.raises(ValueError) as info:
        Accelerator(cpu=True, log_with=["wandbb"])
    message = str(info.value)
    assert message.startswith("Unknown tracker 'wandbb'; known trackers are [")
    assert "'wandb'" in message and "Check the spelling" in message


@pytest.mark.parametrize(("name", "module", "extra"), [("aim", "aim", "aim")])
def test_uninstalled_tracker_fails_at_construction_with_install_command(
    monkeypatch, tmp_path, name, module, extra
):
    monkeypatch.setitem(sys.modules, module, None)  # the backend cannot be imported here
    with pytest.raises(ImportError) as info:
        Accelerator(cpu=True, log_with=name, project_dir=str(tmp_path))
    assert str(info.value) == (
        f"log_with asks for {name!r}, but its backend package is not installed. Install it "
        f'with: pip install "accel-trackers[{extra}]"'
    )


def test_directory_tracker_without_project_dir_fails_at_construction():
    pytest.importorskip("tensorboard", reason="needs TensorBoard (accel-trackers[tensorboard])")
    with pytest.raises(
        ValueError, match=r"'tensorboard' tracker writes to a directory.*project_dir"
    ):
        Accelerator(cpu=True, log_with="tensorboard")


def test_tracker_instance_and_all_keep_working(tmp_path):
    recorder = _Recorder()
    acc = Accelerator(cpu=True, log_with=recorder)
    acc.init_trackers("run")
    acc.log({"loss": 1.0}, step=1)
    assert acc.trackers == [recorder] and recorder.logged[-1] == {"loss": 1.0}
    acc.end_training()
    everything = Accelerator(cpu=True, log_with="all", project_dir=str(tmp_path))
    assert [str(t) for t in everything.log_with] == get_available_trackers()
    if "tensorboard" in get_available_trackers():
        assert LoggerType.TENSORBOARD in everything.log_with

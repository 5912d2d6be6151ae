"""The launcher backends: the built-in ones in their order, and one registered from outside
accel_launch that starts a real two-process job."""

import argparse
import sys

import pytest
from accel_state.testing import free_port, run_command

from accel_launch import LaunchConfig, Launcher, register_launcher
from accel_launch.launchers._launcher_registry import registered

from .conftest import SCRIPTS, reports


def test_the_built_in_backends_in_the_order_they_are_asked():
    assert [launcher.name for launcher in registered()] == [
        "slurm-task",
        "mpirun",
        "deepspeed",
        "python",
        "torchrun",
    ]


def test_each_backend_names_config_fields_that_exist():
    config = LaunchConfig()
    for launcher in registered():
        for name in launcher.config_fields:
            section, _, key = name.partition(".")
            assert hasattr(config, section), (launcher.name, name)
            assert not key or hasattr(getattr(config, section), key), (launcher.name, name)


def test_register_refuses_a_taken_name_and_an_unknown_neighbour():
    class Again(Launcher):
        name = "torchrun"

    with pytest.raises(ValueError, match="'torchrun' is already registered"):
        register_launcher(Again())

    class New(Launcher):
        name = "new"

    with pytest.raises(ValueError, match="got 'nowhere'"):
        register_launcher(New(), before="nowhere")
    with pytest.raises(ValueError, match="instance of a Launcher subclass"):
        register_launcher(argparse.Namespace())  # type: ignore[arg-type]


def _through_shell(*args: str, timeout: float):
    """Run ``accel launch`` with the shell backend registered (it applies with its flag)."""
    command = [sys.executable, str(SCRIPTS / "launch_through_shell.py"), *args]
    return run_command(command, timeout=timeout)


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_a_backend_registered_from_outside_runs_two_processes():
    port = str(free_port())
    script = str(SCRIPTS / "report_env.py")
    out = _through_shell(
        "--through_shell",
        "--cpu",
        "--num_processes",
        "2",
        "--main_process_port",
        port,
        script,
        "--seen",
        timeout=240,
    )
    assert "2 processes on 1 machine via shell" in out.stderr, out.stderr
    rows = reports(out.stdout)
    assert [r["process_index"] for r in rows] == [0, 1], out.stdout + out.stderr
    assert all(r["num_processes"] == 2 and r["argv"] == ["--seen"] for r in rows)
    assert all(r["ACCEL_USE_CPU"] == "1" for r in rows)


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
def test_the_outside_backend_stays_out_of_a_launch_without_its_flag():
    out = _through_shell(
        "--cpu", "--num_processes", "1", str(SCRIPTS / "report_env.py"), timeout=150
    )
    assert "via shell" not in out.stderr
    assert [r["process_index"] for r in reports(out.stdout)] == [0]

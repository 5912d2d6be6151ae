"""The launcher backends: the built-in ones in their order, the config-file settings each
declares, and one registered from outside accel_launch that starts a real two-process job."""

import argparse
import dataclasses
import io
import sys

import pytest
import yaml
from accel_state.testing import free_port, run_command

from accel_launch import ConfigError, ConfigField, LaunchConfig, Launcher, register_launcher
from accel_launch.configs._config_file import config_from_dict, load_config_file
from accel_launch.configs._migrate import migrate
from accel_launch.launchers import _launcher_registry
from accel_launch.launchers._launcher_registry import launcher_fields, registered
from accel_launch.questionnaire._prompts import Prompter
from accel_launch.questionnaire._questionnaire import _ask_machines

from .conftest import SCRIPTS, reports


def test_the_built_in_backends_in_the_order_they_are_asked():
    assert [launcher.name for launcher in registered()] == [
        "slurm-task",
        "mpirun",
        "deepspeed",
        "python",
        "torchrun",
    ]


def test_each_built_in_setting_is_declared_as_launch_config_has_it():
    fields = {f.name: f for f in dataclasses.fields(LaunchConfig)}
    declared = launcher_fields()
    assert sorted(declared) == [
        "max_restarts",
        "monitor_interval",
        "mpirun_hostfile",
        "rdzv_backend",
    ]
    for name, setting in declared.items():
        assert setting.default == fields[name].default, name
        assert setting.annotation == fields[name].type, name
        assert setting.help.strip(), name


def _check_level(value, config):
    if not 0 <= value <= 9:
        raise ConfigError(f"pbs_level must be in [0, 9]; got {value}. Use e.g. 3.")


class _Pbs(Launcher):
    name = "pbs"
    config_fields = (
        ConfigField("pbs_queue", str | None, None, "Queue of the job.", prompt="PBS queue?"),
        ConfigField("pbs_level", int, 1, "Priority level.", check=_check_level),
        ConfigField("pbs_hosts", str | None, None, "Hosts.", replaces="pbs_config.hosts"),
    )

    def applies(self, plan, args):
        return False


@pytest.fixture
def pbs_registered(monkeypatch):
    """The backend above registered in this process, for this test only."""
    monkeypatch.setattr(_launcher_registry, "_REGISTRY", list(registered()))
    register_launcher(_Pbs())


def test_an_outside_backend_setting_is_read_written_and_checked(pbs_registered, tmp_path):
    assert LaunchConfig().pbs_level == 1  # type: ignore[attr-defined]
    path = tmp_path / "c.yaml"
    path.write_text("num_processes: 2\npbs_queue: long\npbs_level: '4'\n")
    config = load_config_file(path)
    assert (config.pbs_queue, config.pbs_level) == ("long", 4)  # type: ignore[attr-defined]
    written = config.to_dict()
    assert written["pbs_queue"] == "long" and written["pbs_level"] == 4
    assert list(written)[-3:] == ["pbs_queue", "pbs_level", "pbs_hosts"]
    assert load_config_file(config.save(tmp_path / "again.yaml")).to_dict() == written
    with pytest.raises(ConfigError, match=r"pbs_level must be in \[0, 9\]; got 12\. Use e\.g\. 3"):
        config_from_dict({"pbs_level": 12})
    with pytest.raises(ConfigError, match="pbs_level must be an integer; got 'high'"):
        config_from_dict({"pbs_level": "high"})
    with pytest.raises(ConfigError, match="pbs_level needs a value; got null"):
        config_from_dict({"pbs_level": None})
    with pytest.raises(ConfigError, match="Did you mean 'pbs_queue'"):
        config_from_dict({"pbs_queu": "long"})
    bad = LaunchConfig()
    bad.pbs_level = 10  # type: ignore[attr-defined]
    with pytest.raises(ConfigError, match="got 10"):
        bad.validate()


def test_an_outside_backend_setting_replaces_an_old_section(pbs_registered):
    updated, changes = migrate({"pbs_config": {"hosts": "h1,h2"}})
    assert updated["pbs_hosts"] == "h1,h2" and "pbs_config" not in updated
    assert "replaced pbs_config by pbs_hosts" in changes
    assert config_from_dict({"pbs_config": {"hosts": "a"}}).pbs_hosts == "a"  # type: ignore[attr-defined]


def test_the_questionnaire_asks_the_declared_questions(pbs_registered, tmp_path):
    hosts = tmp_path / "hosts"
    hosts.write_text("localhost slots=2\n")
    answers = ["2", "0", "10.0.0.1", "", "", "1", "workq", "yes", str(tmp_path / "no"), str(hosts)]
    out = io.StringIO()
    config = LaunchConfig()
    _ask_machines(Prompter(io.StringIO("\n".join(answers) + "\n"), out, False), config, "multi-CPU")
    assert config.pbs_queue == "workq"  # type: ignore[attr-defined]
    assert config.mpirun_hostfile == str(hosts)
    shown = out.getvalue()
    assert shown.index("PBS queue?") < shown.index("Start the processes with mpirun? (yes/no)")
    assert f"{str(tmp_path / 'no')!r} is not an existing file" in shown
    gpu = LaunchConfig()
    _ask_machines(
        Prompter(io.StringIO("\n".join(answers[:7]) + "\n"), out, False), gpu, "multi-GPU"
    )
    assert gpu.mpirun_hostfile is None  # asked on multi-CPU only


def test_register_refuses_a_setting_that_is_taken_or_no_declaration(monkeypatch):
    monkeypatch.setattr(_launcher_registry, "_REGISTRY", list(registered()))

    class Clash(Launcher):
        name = "clash"
        config_fields = (ConfigField("max_restarts", int, 0, "Again."),)

    with pytest.raises(ValueError, match="'max_restarts', which the config file already has"):
        register_launcher(Clash())

    class Names(Launcher):
        name = "names"
        config_fields = ("names_queue",)  # type: ignore[assignment]

    with pytest.raises(ValueError, match="holds ConfigField declarations.*got 'names_queue'"):
        register_launcher(Names())
    assert [launcher.name for launcher in registered()][0] == "slurm-task"


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
@pytest.mark.timeout(300)
def test_the_outside_backend_reads_its_setting_from_the_config_file(tmp_path):
    config = tmp_path / "shell.yaml"
    config.write_text(yaml.safe_dump({"use_cpu": True, "num_processes": 2, "shell_niceness": 3}))
    port = str(free_port())
    args = ["--through_shell", "--main_process_port", port, str(SCRIPTS / "report_env.py")]
    out = _through_shell("--config_file", str(config), *args, timeout=240)
    assert "shell backend: niceness 3" in out.stderr, out.stderr
    assert [r["process_index"] for r in reports(out.stdout)] == [0, 1], out.stdout + out.stderr
    explained = _through_shell("--config_file", str(config), "--explain", *args, timeout=120)
    assert "shell_niceness" in explained.stdout + explained.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
def test_the_outside_backend_refuses_a_bad_setting_of_the_config_file(tmp_path):
    config = tmp_path / "shell.yaml"
    config.write_text("use_cpu: true\nshell_niceness: 40\n")
    script = str(SCRIPTS / "report_env.py")
    command = [sys.executable, str(SCRIPTS / "launch_through_shell.py")]
    out = run_command(
        [*command, "--config_file", str(config), "--through_shell", script],
        timeout=150,
        check=False,
    )
    assert out.returncode != 0
    assert "shell_niceness must be in [0, 19]; got 40. Use e.g. 5" in out.stderr, out.stderr
    assert "REPORT" not in out.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(200)
def test_the_outside_backend_stays_out_of_a_launch_without_its_flag():
    out = _through_shell(
        "--cpu", "--num_processes", "1", str(SCRIPTS / "report_env.py"), timeout=150
    )
    assert "via shell" not in out.stderr
    assert [r["process_index"] for r in reports(out.stdout)] == [0]

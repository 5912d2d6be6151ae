"""The reference library's commands on accel: its installed console scripts (``accelerate
launch``, ``accelerate config`` ...) and ``python -m accelerate.commands.<name>`` under the
switch, and the ``accelerate`` command ``accel install-command`` provides where only accel is
installed. Real processes, each under a timeout; a launched script proves it ran under accel's
launcher by the variable that launcher sets (``ACCEL_DISTRIBUTED_TYPE``) and by ``import
accelerate`` giving accel.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

BIN = Path(sys.executable).parent

SCRIPT = """\
import json, os, sys
import accelerate
record = {
    "rank": os.environ.get("RANK"),
    "world_size": os.environ.get("WORLD_SIZE"),
    "launcher": os.environ.get("ACCEL_DISTRIBUTED_TYPE"),
    "accel": getattr(accelerate, "__accel__", False),
}
with open(os.path.join(sys.argv[1], f"rank{record['rank']}.json"), "w") as file:
    json.dump(record, file)
"""


def _command(
    argv: list[str], env: dict[str, str], timeout: float = 240
) -> subprocess.CompletedProcess:
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def _script(tmp_path: Path) -> tuple[Path, Path]:
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    out = tmp_path / "ranks"
    out.mkdir()
    return script, out


def _ran_two_processes_on_accel(done: subprocess.CompletedProcess, out: Path) -> None:
    assert done.returncode == 0, (done.stdout + done.stderr)[-6000:]
    records = sorted(json.loads(p.read_text())["rank"] for p in out.glob("rank*.json"))
    assert records == ["0", "1"], done.stdout + done.stderr
    for path in out.glob("rank*.json"):
        record = json.loads(path.read_text())
        assert record["world_size"] == "2"
        assert record["launcher"] == "MULTI_CPU", "not started by accel's launcher"
        assert record["accel"] is True, "`import accelerate` did not give accel"


def _reference_script(name: str) -> Path:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"the reference's {name} command is not installed (uv sync --group bench)")
    return path


@pytest.mark.timeout(300)
def test_reference_accelerate_command_launches_on_accel_under_the_switch(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    accelerate = _reference_script("accelerate")
    script, out = _script(tmp_path)
    argv = [str(accelerate), "launch", "--num_processes", "2", str(script), str(out)]
    _ran_two_processes_on_accel(_command(argv, eco.environment(True)), out)
    # Without the switch the same script is the reference's command, unchanged.
    done = _command([str(accelerate), "--help"], eco.environment(False), timeout=120)
    assert done.returncode == 0 and "accelerate <command> [<args>]" in done.stdout


@pytest.mark.timeout(300)
def test_python_m_accelerate_commands_launch_runs_on_accel(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    script, out = _script(tmp_path)
    argv = [sys.executable, "-m", "accelerate.commands.launch", "--num_processes", "2"]
    _ran_two_processes_on_accel(
        _command([*argv, str(script), str(out)], eco.environment(True)), out
    )


@pytest.mark.timeout(300)
def test_reference_config_commands_write_accels_config_file(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    accelerate = _reference_script("accelerate")
    env = eco.environment(True)
    env["ACCEL_CONFIG_HOME"] = str(tmp_path / "home")
    lines = {
        "flag_then_default.yaml": [str(accelerate), "config", "--config_file", "{}", "default"],
        "default_then_flag.yaml": [str(accelerate), "config", "default", "--config_file", "{}"],
        "script.yaml": [
            str(_reference_script("accelerate-config")),
            "default",
            "--config_file",
            "{}",
        ],
        "module.yaml": [
            sys.executable,
            "-m",
            "accelerate.commands.config.config",
            "default",
            "--config_file",
            "{}",
        ],
    }
    written = {}
    for name, argv in lines.items():
        target = tmp_path / name
        done = _command([w.replace("{}", str(target)) for w in argv], env, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        written[name] = target
    done = _command([str(accelerate), "config", "default"], env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    written["default"] = tmp_path / "home" / "default_config.yaml"

    from accel_launch import load_config_file

    for path in written.values():
        assert "config_version:" in path.read_text(), f"{path} is not accel's config file"
        assert load_config_file(path).distributed_type == "NO"


MODULES = {
    "accelerate_cli": "usage: accelerate ",
    "launch": "usage: accelerate launch",
    "config.config": "usage: accelerate config",
    "estimate": "usage: accelerate estimate-memory",
    "merge": "usage: accelerate merge-weights",
    "env": "usage: accelerate env",
    "test": "usage: accelerate test",
}


@pytest.mark.timeout(600)
def test_every_runnable_reference_command_module_runs_accels_command_once(
    eco: SimpleNamespace,
) -> None:
    env = eco.environment(True)
    for module, usage in MODULES.items():
        done = _command(
            [sys.executable, "-m", f"accelerate.commands.{module}", "--help"], env, timeout=120
        )
        assert done.returncode == 0 and usage in done.stdout, (module, done.stdout + done.stderr)
    # runpy runs accel's module as __main__ and does not import it besides.
    code = textwrap.dedent(
        """
        import runpy, sys
        sys.argv = ["launch", "--version"]
        try:
            runpy.run_module("accelerate.commands.launch", run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            print("exit", stop.code)
        print("imported" if "accel.commands.launch" in sys.modules else "not imported")
        """
    )
    done = _command([sys.executable, "-c", code], env, timeout=120)
    assert done.stdout.split("\n")[-3:] == ["exit 0", "not imported", ""], done.stdout + done.stderr
    assert "accel-launch" in done.stdout


@pytest.mark.timeout(300)
def test_installed_accelerate_command_runs_a_shell_scripts_launch_on_accel(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    scripts = tmp_path / "bin"
    accel = [sys.executable, "-m", "accel_launch.cli"]
    env = eco.environment(False)  # the command turns the switch on by itself
    done = _command([*accel, "install-command", "accelerate", "--scripts_dir", str(scripts)], env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert os.access(scripts / "accelerate", os.X_OK)

    script, out = _script(tmp_path)
    env["PATH"] = f"{scripts}{os.pathsep}{env.get('PATH', '')}"
    shell = f"cd {tmp_path} && accelerate launch --num_processes 2 train.py {out}"
    _ran_two_processes_on_accel(_command(["bash", "-c", shell], env), out)

    remove = [*accel, "install-command", "--remove", "accelerate", "--scripts_dir", str(scripts)]
    done = _command(remove, env, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not (scripts / "accelerate").exists()
    assert "removed" in done.stdout


@pytest.mark.timeout(300)
def test_install_command_leaves_a_command_it_did_not_write(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    accel = [sys.executable, "-m", "accel_launch.cli", "install-command"]
    env = eco.environment(False)
    scripts = tmp_path / "bin"
    scripts.mkdir()
    other = scripts / "accelerate"
    other.write_text("#!/bin/sh\necho someone else's accelerate\n")
    for extra in ([], ["--remove"]):
        done = _command([*accel, "accelerate", *extra, "--scripts_dir", str(scripts)], env, 120)
        assert done.returncode == 2, done.stdout + done.stderr
        assert "a command it did not write" in done.stderr and str(other) in done.stderr
        assert other.read_text() == "#!/bin/sh\necho someone else's accelerate\n"
    done = _command([*accel, "accelerat", "--scripts_dir", str(scripts)], env, 120)
    assert done.returncode == 2 and "got ['accelerat']" in done.stderr, done.stderr

    # The reference's own command, in this interpreter's scripts folder, is left as it is.
    reference = _reference_script("accelerate")
    before = reference.read_bytes()
    for extra in ([], ["--remove"]):
        done = _command([*accel, "accelerate", *extra], env, 120)
        assert done.returncode == 2 and "a command it did not write" in done.stderr, done.stderr
    assert reference.read_bytes() == before

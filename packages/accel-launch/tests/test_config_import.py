"""`accel config import` and the notices about a reference config file, through the real CLI."""

import os
import signal
import sys
import textwrap

import pytest
import yaml

from .conftest import Terminal, accel

# What `accelerate config` writes for two CPU processes (keys in its order, its defaults).
REFERENCE_FILE = textwrap.dedent(
    """\
    # two processes on this machine
    compute_environment: LOCAL_MACHINE
    debug: false
    distributed_type: MULTI_CPU
    downcast_bf16: 'no'
    enable_cpu_affinity: false
    ipex_config:
      ipex: false
    machine_rank: 0
    main_process_ip: null
    main_process_port: null
    main_training_function: main
    mixed_precision: bf16
    mpirun_config: {}
    num_machines: 1
    num_processes: 2
    rdzv_backend: static
    same_network: true
    tpu_env: []
    tpu_use_cluster: false
    tpu_use_sudo: false
    use_cpu: true
    """
)


@pytest.fixture(autouse=True)
def _no_cache_variables(monkeypatch):
    """These tests choose HF_HOME / XDG_CACHE_HOME themselves (the commands inherit os.environ)."""
    monkeypatch.delenv("HF_HOME", raising=False)
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)


def _homes(tmp_path, **extra):
    """Environment of a user whose home is inside tmp_path, with no HF_HOME / XDG_CACHE_HOME."""
    env = {
        key: value for key, value in os.environ.items() if key not in ("HF_HOME", "XDG_CACHE_HOME")
    }
    env["HOME"] = str(tmp_path / "home")
    env.update(extra)
    return env


def _reference(path, text=REFERENCE_FILE):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _run(args, env, check=True):
    return accel(*args, env=env, check=check)


def test_import_from_default_reference_location(tmp_path, isolated_config_home):
    env = _homes(tmp_path)
    source = _reference(tmp_path / "home/.cache/huggingface/accelerate/default_config.yaml")
    done = _run(["config", "import"], _env(env))
    target = isolated_config_home / "default_config.yaml"
    assert f"accel config: imported {source} into {target}" in done.stdout
    assert "dropped enable_cpu_affinity (not used by accel)" in done.stdout
    written = yaml.safe_load(target.read_text())
    assert (written["num_processes"], written["distributed_type"]) == (2, "MULTI_CPU")
    assert written["mixed_precision"] == "bf16" and written["use_cpu"] is True
    assert "enable_cpu_affinity" not in written and written["config_version"] == 2
    assert target.read_text().startswith("# two processes on this machine")
    # accel launch reads the imported file like any accel config.
    shown = _run(["env"], _env(env)).stdout
    assert "num_processes: 2" in shown and "mixed_precision: bf16" in shown


def _env(env):
    # The autouse fixture set ACCEL_CONFIG_HOME in os.environ; keep it in the child.
    return {**env, "ACCEL_CONFIG_HOME": os.environ["ACCEL_CONFIG_HOME"]}


def test_hf_home_and_xdg_cache_home_are_honoured(tmp_path, isolated_config_home):
    xdg = tmp_path / "xdg"
    _reference(xdg / "huggingface/accelerate/default_config.yaml")
    done = _run(["config", "import"], _env(_homes(tmp_path, XDG_CACHE_HOME=str(xdg))))
    assert str(xdg / "huggingface/accelerate/default_config.yaml") in done.stdout
    os.remove(isolated_config_home / "default_config.yaml")
    hf = tmp_path / "hf"
    _reference(
        hf / "accelerate/default_config.yaml",
        REFERENCE_FILE.replace("precision: bf16", "precision: fp16"),
    )
    env = _homes(tmp_path, XDG_CACHE_HOME=str(xdg), HF_HOME=str(hf))
    _run(["config", "import"], _env(env))
    written = yaml.safe_load((isolated_config_home / "default_config.yaml").read_text())
    assert written["mixed_precision"] == "fp16"  # HF_HOME wins over XDG_CACHE_HOME


def test_bad_files_are_refused_and_nothing_is_written(tmp_path, isolated_config_home):
    env = _env(_homes(tmp_path))
    target = isolated_config_home / "default_config.yaml"
    missing = _run(["config", "import"], env, check=False)
    assert missing.returncode == 2 and not target.exists()
    assert "does not exist. Pass the path of the file to import" in missing.stderr
    unknown = _reference(tmp_path / "unknown.yaml", REFERENCE_FILE + "num_proceses: 4\n")
    done = _run(["config", "import", str(unknown)], env, check=False)
    assert done.returncode == 2 and not target.exists()
    assert "unknown setting 'num_proceses'. Did you mean 'num_processes'?" in done.stderr
    bad_value = _reference(
        tmp_path / "bad.yaml", REFERENCE_FILE.replace("precision: bf16", "precision: fp12")
    )
    done = _run(["config", "import", str(bad_value)], env, check=False)
    assert done.returncode == 2 and not target.exists()
    assert "mixed_precision must be one of" in done.stderr and "'fp12'" in done.stderr
    affinity = _reference(
        tmp_path / "affinity.yaml",
        REFERENCE_FILE.replace("enable_cpu_affinity: false", "enable_cpu_affinity: true"),
    )
    done = _run(["config", "import", str(affinity)], env, check=False)
    assert done.returncode == 2 and not target.exists()
    assert "must be off to be imported (they would be lost); got enable_cpu_affinity=True" in (
        done.stderr
    )


def test_existing_accel_file_is_kept_unless_overwrite(tmp_path, isolated_config_home):
    env = _env(_homes(tmp_path))
    source = _reference(tmp_path / "ref.yaml")
    target = tmp_path / "out" / "mine.yaml"
    _run(["config", "import", str(source), "--config_file", str(target)], env)
    target.write_text("num_processes: 3\n")
    done = _run(["config", "import", str(source), "--config_file", str(target)], env, check=False)
    assert done.returncode == 2 and "Pass --overwrite to replace it" in done.stderr
    assert target.read_text() == "num_processes: 3\n"
    _run(["config", "import", str(source), "--config_file", str(target), "--overwrite"], env)
    assert yaml.safe_load(target.read_text())["num_processes"] == 2


def test_launch_without_config_names_the_reference_file(tmp_path, isolated_config_home):
    env = _env(_homes(tmp_path))
    source = _reference(tmp_path / "home/.cache/huggingface/accelerate/default_config.yaml")
    script = tmp_path / "hello.py"
    script.write_text("print('script ran')\n")
    done = _run(["launch", "--cpu", "--num_processes", "1", str(script)], env)
    assert "script ran" in done.stdout
    assert f"the reference library's config file {source} exists" in done.stderr
    assert "Run `accel config import`" in done.stderr
    _run(["config", "import"], env)
    again = _run(["launch", "--cpu", "--num_processes", "1", str(script)], env)
    assert "reference library" not in again.stderr


def test_questionnaire_names_the_reference_file(tmp_path, isolated_config_home):
    env = _env(_homes(tmp_path))
    source = _reference(tmp_path / "home/.cache/huggingface/accelerate/default_config.yaml")
    terminal = Terminal([sys.executable, "-m", "accel_launch.cli", "config"], env)
    output = terminal.expect("Run `accel config import`")
    assert str(source) in output.replace("\r\n", "").replace("\n", "")
    os.kill(terminal.proc.pid, signal.SIGINT)  # the menu reads raw keys: Ctrl-C as a signal
    assert terminal.finish() == 130
    assert not (isolated_config_home / "default_config.yaml").exists()

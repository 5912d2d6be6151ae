"""TPU command lines built without a TPU: ``accel tpu-config`` (printed with --debug), the
``--tpu`` launch flags (pod command printed with --explain), ``install_xla``'s pip commands."""

from __future__ import annotations

import importlib.util
import shlex
import sys

import pytest

from accel_launch import install_xla
from accel_launch.cli import main
from accel_launch.commands._tpu import xla_install_commands

NO_XLA = importlib.util.find_spec("torch_xla") is None


def _gcloud_line(out: str) -> list[str]:
    line = next(line for line in out.splitlines() if "gcloud " in line)
    return shlex.split(line[line.index("gcloud") :])


def test_tpu_config_prints_the_gcloud_command(capsys, tmp_path) -> None:
    commands = tmp_path / "setup.sh"
    commands.write_text("pip list\necho ready\n")
    config = tmp_path / "tpu.yaml"
    config.write_text("tpu_name: pod-a\ntpu_zone: us-central2-b\ndistributed_type: XLA\n")
    argv = ["tpu-config", "--config_file", str(config), "--command_file", str(commands)]
    assert main([*argv, "--install_accelerate", "--accelerate_version", "0.1.0", "--debug"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Running gcloud compute tpus tpu-vm ssh pod-a")
    assert _gcloud_line(out) == [
        *"gcloud compute tpus tpu-vm ssh pod-a --zone us-central2-b --command".split(),
        "cd /usr/share; pip install accel-torch==0.1.0; pip list; echo ready",
        "--worker",
        "all",
    ]
    # Flags win over the file; --use_alpha and repeated --command.
    argv = ["tpu-config", "--tpu_name", "pod-b", "--tpu_zone", "us-east1-d", "--use_alpha"]
    assert main([*argv, "--command", "echo", "hi", "--command", "pwd", "--debug"]) == 0
    got = _gcloud_line(capsys.readouterr().out)
    assert got[:3] == ["gcloud", "alpha", "compute"] and got[6] == "pod-b"
    assert got[got.index("--command") + 1] == "cd /usr/share; echo hi; pwd"


def test_tpu_config_refuses_what_it_cannot_run(capsys) -> None:
    assert main(["tpu-config", "--tpu_name", "p", "--command", "ls", "--debug"]) == 2
    err = capsys.readouterr().err
    assert "needs the zone of the pod; got none" in err and "--tpu_zone" in err
    assert main(["tpu-config", "--tpu_name", "p", "--tpu_zone", "us-east1-d", "--debug"]) == 2
    assert "got neither --command nor --command_file" in capsys.readouterr().err
    argv = ["tpu-config", "--tpu_name", "p", "--tpu_zone", "us-east1-d", "--command", "ls"]
    assert main([*argv, "--install_accel", "--accel_version", "dev", "--debug"]) == 2
    assert "got 'dev'" in capsys.readouterr().err


def test_launch_tpu_cluster_prints_the_pod_command(capsys, tmp_path) -> None:
    argv = ["launch", "--tpu_cluster", "--tpu_name", "pod", "--tpu_zone", "europe-west4-a"]
    argv += ["--tpu_use_sudo", "--vm", "0", "--vm", "2", "--env", "XLA_USE_BF16=1"]
    argv += ["--main_training_function", "train", "--num_processes", "8", "--explain"]
    assert main([*argv, "train.py", "--lr", "0.1"]) == 0
    got = _gcloud_line(capsys.readouterr().out)
    assert got[:9] == "gcloud compute tpus tpu-vm ssh pod --zone europe-west4-a --command".split()
    assert got[-2:] == ["--worker", "0,2"]
    assert got[9] == (
        "export XLA_USE_BF16=1; sudo accel launch --tpu "
        "--no_tpu_cluster --main_training_function train --num_processes 8 train.py --lr 0.1"
    )
    assert main(["launch", "--tpu_cluster", "--tpu_name", "p", "--explain", "t.py"]) == 2
    assert "got tpu_name='p', tpu_zone=None" in capsys.readouterr().err
    bad = [
        "launch",
        "--tpu_cluster",
        "--tpu_name",
        "p",
        "--tpu_zone",
        "us-east1-d",
        "--env",
        "1X=2",
    ]
    assert main([*bad, "--explain", "t.py"]) == 2
    assert "tpu_env (--env) items are KEY=VALUE" in capsys.readouterr().err


@pytest.mark.skipif(not NO_XLA, reason="torch_xla is installed: tests/xla runs --tpu")
def test_launch_tpu_without_torch_xla_says_how_to_get_it(capsys, tmp_path) -> None:
    script = tmp_path / "train.py"
    script.write_text("def main():\n    raise SystemExit('must not run')\n")
    assert main(["launch", "--tpu", str(script)]) == 2
    err = capsys.readouterr().err
    assert "TPU / XLA runs need torch_xla, but torch_xla is not installed; got --tpu." in err
    assert "tools/xla_env.py" in err
    # --no_tpu_cluster alone is the plain path (what each pod worker gets with --tpu).
    assert main(["launch", "--no_tpu_cluster", "--explain"]) == 0


def test_install_xla_builds_pip_commands_and_refuses_outside_colab(monkeypatch) -> None:
    pip = [sys.executable, "-m", "pip", "install"]
    assert xla_install_commands(torch_version="2.9.1+cpu") == [[*pip, "torch-xla==2.9.*"]]
    assert xla_install_commands(upgrade=True) == [[*pip, "-U", "torch"], [*pip, "torch-xla"]]
    monkeypatch.delenv("COLAB_RELEASE_TAG", raising=False)
    with pytest.raises(RuntimeError, match="Google Colab notebook only; got a Python outside"):
        install_xla()

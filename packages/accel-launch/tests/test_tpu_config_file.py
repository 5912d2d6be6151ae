"""The TPU section of ``accel config`` and the TPU keys of the config file: written from piped
answers, read back by ``accel tpu-config`` and ``accel launch`` (flags first), refused when
wrong, and kept by ``accel config import`` / ``accel config update``."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap

import pytest
import yaml

from accel_launch import config_from_dict
from accel_launch._errors import ConfigError
from accel_launch.cli import main
from accel_launch.configs._config_import import import_config

# TPU; function `train`; a pod `my-pod` in zone `Z1` (refused, asked again) then us-central2-b,
# with sudo; two setup commands; workers 0 and 1; one variable; 8 cores; bf16 with downcast.
ANSWERS = ["5", "train", "yes", "my-pod", "Z1", "us-central2-b", "yes", "yes", "no"]
ANSWERS += ["pip install -r req.txt", "yes", "echo ready", "no", "0,1", "XLA_FLAG=1", "8", "2"]
ANSWERS += ["yes"]


def _gcloud_line(out: str) -> list[str]:
    line = next(line for line in out.splitlines() if "gcloud " in line)
    return shlex.split(line[line.index("gcloud") :])


def test_tpu_answers_write_the_keys_tpu_config_and_launch_read(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("ACCEL_CONFIG_HOME", str(tmp_path / "home"))
    target = tmp_path / "tpu.yaml"
    written = subprocess.run(
        [sys.executable, "-m", "accel_launch.cli", "config", "--config_file", str(target)],
        input="\n".join(ANSWERS) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": "/usr/bin:/bin"},
    )
    assert written.returncode == 0, written.stdout + written.stderr
    assert (
        "tpu_zone must be a Google Cloud zone; got 'Z1'. Use e.g. us-central2-b; try"
        in written.stdout
    )
    data = yaml.safe_load(target.read_text())
    assert data["distributed_type"] == "XLA" and data["num_processes"] == 8
    assert {key: data[key] for key in ("mixed_precision", "downcast_bf16")} == {
        "mixed_precision": "bf16",
        "downcast_bf16": True,
    }
    assert {key: data[key] for key in data if key.startswith(("tpu_", "comm", "main_t"))} == {
        "main_training_function": "train",
        "tpu_use_cluster": True,
        "tpu_name": "my-pod",
        "tpu_zone": "us-central2-b",
        "tpu_use_sudo": True,
        "tpu_vm": ["0", "1"],
        "tpu_env": ["XLA_FLAG=1"],
        "command_file": None,
        "commands": ["pip install -r req.txt", "echo ready"],
    }
    # accel tpu-config builds its gcloud command from the file ...
    assert main(["tpu-config", "--config_file", str(target), "--debug"]) == 0
    assert _gcloud_line(capsys.readouterr().out) == [
        *"gcloud compute tpus tpu-vm ssh my-pod --zone us-central2-b --command".split(),
        "cd /usr/share; pip install -r req.txt; echo ready",
        "--worker",
        "all",
    ]
    # ... and a flag wins over it.
    argv = ["tpu-config", "--config_file", str(target), "--tpu_zone", "europe-west4-a"]
    assert main([*argv, "--command", "pwd", "--debug"]) == 0
    got = _gcloud_line(capsys.readouterr().out)
    assert got[7:10] == ["europe-west4-a", "--command", "cd /usr/share; pwd"]
    # accel launch: the file makes it a pod launch; --explain says where each value came from.
    argv = ["launch", "--config_file", str(target), "--tpu_name", "pod-b", "--explain"]
    assert main([*argv, "train.py", "--lr", "1"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"tpu_name +'pod-b' +flag --tpu_name", out)
    assert re.search(rf"tpu_zone +'us-central2-b' +config file {re.escape(str(target))}", out)
    got = _gcloud_line(out)
    assert got[:9] == "gcloud compute tpus tpu-vm ssh pod-b --zone us-central2-b --command".split()
    assert got[9] == (
        "export XLA_DOWNCAST_BF16=1; export XLA_FLAG=1; sudo accel launch --tpu "
        "--no_tpu_cluster --main_training_function train --num_processes 8 train.py --lr 1"
    )
    assert got[-2:] == ["--worker", "0,1"]


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"tpu_zone": "Z1"}, "tpu_zone must be a Google Cloud zone; got 'Z1'"),
        ({"tpu_name": "My Pod"}, "tpu_name must be lowercase letters, digits and hyphens"),
        ({"main_training_function": "1st"}, "a Python identifier; got '1st'. Use e.g. main."),
        ({"mixed_precision": "fp16"}, "takes mixed_precision 'no' or 'bf16'"),
        ({"downcast_bf16": True}, "got downcast_bf16=true with mixed_precision='no'"),
        ({"tpu_env": ["NOVALUE"]}, "items are KEY=VALUE with KEY a variable name; got 'NOVALUE'"),
        ({"tpu_vm": "0,1"}, "tpu_vm must be a list of texts; got str '0,1'"),
        ({"tpu_vm": ["0 1"]}, "tpu_vm (--vm) must be a worker index or VM name; got '0 1'"),
        ({"commands": ["ls"], "command_file": "c.sh"}, "from commands or from command_file"),
        ({"distributed_type": "MULTI_CPU", "tpu_use_sudo": True}, "applies to TPU / XLA runs"),
    ],
)
def test_bad_tpu_values_are_refused_with_the_rule(settings, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        config_from_dict({"distributed_type": "XLA", **settings})


REFERENCE_TPU_FILE = textwrap.dedent(
    """\
    # a pod, as the reference library writes it
    command_file: null
    commands:
    - pip install -r requirements.txt
    compute_environment: LOCAL_MACHINE
    distributed_type: XLA
    downcast_bf16: 'no'
    main_training_function: main
    mixed_precision: 'no'
    num_machines: 1
    num_processes: 8
    tpu_env:
    - ''
    tpu_name: my-pod
    tpu_use_cluster: true
    tpu_use_sudo: false
    tpu_vm:
    - ''
    tpu_zone: us-central2-b
    use_cpu: false
    """
)


def test_import_and_update_keep_the_tpu_keys(tmp_path, capsys):
    source = tmp_path / "reference.yaml"
    source.write_text(REFERENCE_TPU_FILE)
    target, config, _ = import_config(source, tmp_path / "accel.yaml")
    data = yaml.safe_load(target.read_text())
    kept = {
        "distributed_type": "XLA",
        "tpu_use_cluster": True,
        "tpu_name": "my-pod",
        "tpu_zone": "us-central2-b",
        "commands": ["pip install -r requirements.txt"],
        "num_processes": 8,
        "tpu_vm": None,  # the reference writes [''] for "every worker"
        "tpu_env": None,
        "downcast_bf16": False,
    }
    assert {key: data[key] for key in kept} == kept
    source.write_text(REFERENCE_TPU_FILE)  # `config update` rewrites the file in place
    assert main(["config", "update", "--config_file", str(source)]) == 0
    assert "dropped" not in capsys.readouterr().out
    assert {key: yaml.safe_load(source.read_text())[key] for key in kept} == kept

"""The parallelism layout section of ``accel config`` end to end: answers piped to the real
command write a ``parallelism_config`` section, and one 2-process launch with that file gives
each process's Accelerator the ParallelismConfig it describes."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from accel_launch.cli import main
from accel_state.testing import free_port, run_command

SCRIPT = Path(__file__).parent / "scripts" / "report_layout.py"

# multi-CPU on 1 machine, no debug, no dynamo, FSDP2 with the default answers, 2 processes;
# layout: 1 replica, shard 1, tp 1, cp 3 (refused: the product must be 2), then cp 2 (the
# default), alltoall; no mixed precision.
ANSWERS = ["2", "", "", "", "yes", "", "", "", "", "", "", "", "", "2"]
ANSWERS += ["yes", "", "1", "1", "3", "", "2", ""]


def _clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(("ACCEL_", "ACCELERATE_", "FSDP_", "PARALLELISM_CONFIG_")):
            monkeypatch.delenv(name)


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_questionnaire_layout_reaches_the_accelerator_of_each_process(
    tmp_path, monkeypatch, capsys
):
    _clean_environment(monkeypatch)
    monkeypatch.setenv("ACCEL_CONFIG_HOME", str(tmp_path / "home"))
    target = tmp_path / "layout.yaml"
    written = subprocess.run(
        [sys.executable, "-m", "accel_launch.cli", "config", "--config_file", str(target)],
        input="\n".join(ANSWERS) + "\n",
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PATH": "/usr/bin:/bin"},  # no nvidia-smi: a machine without GPUs
    )
    assert written.returncode == 0, written.stdout + written.stderr
    assert "the sizes must multiply to the 2 processes of the run; got 1" in written.stdout
    data = yaml.safe_load(target.read_text())
    assert data["distributed_type"] == "FSDP" and data["fsdp_config"]["fsdp_version"] == 2
    assert data["num_processes"] == 2
    assert data["parallelism_config"] == {
        "parallelism_config_dp_replicate_size": 1,
        "parallelism_config_dp_shard_size": 1,
        "parallelism_config_tp_size": 1,
        "parallelism_config_cp_size": 2,
        "parallelism_config_cp_comm_strategy": "alltoall",
    }
    # The launcher turns the section into the variables the flags write, and says where each
    # value came from; sizes that do not fit the processes are refused before anything starts.
    assert main(["launch", "--config_file", str(target), "--explain", "train.py"]) == 0
    out = capsys.readouterr().out
    assert re.search(rf"parallelism_config_cp_size +2 +config file {re.escape(str(target))}", out)
    assert "ACCEL_PARALLELISM_CONFIG_CP_SIZE=2" in out
    assert "ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY=alltoall" in out
    assert "ACCEL_USE_PARALLELISM_CONFIG=1" in out
    argv = ["launch", "--config_file", str(target), "--num_processes", "4", "--explain", "t.py"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "the parallelism_config sizes must equal the number of processes " in err
    assert "(num_processes=4); got dp_replicate 1 x dp_shard 1 x tp 1 x cp 2 = 2." in err
    # One launch: each process's Accelerator builds the layout from those variables.
    launcher = [sys.executable, "-m", "accel_launch.cli", "launch", "--config_file", str(target)]
    result = run_command(
        [*launcher, "--main_process_port", str(free_port()), str(SCRIPT)], timeout=300
    )
    lines = [line[7:] for line in result.stdout.splitlines() if line.startswith("REPORT ")]
    reports = sorted((json.loads(line) for line in lines), key=lambda r: r["rank"])
    assert [r["rank"] for r in reports] == [0, 1], result.stdout + result.stderr
    for report in reports:
        assert report["distributed_type"] == "FSDP"
        assert report["sizes"] == {"dp_replicate": 1, "dp_shard": 1, "cp": 2, "sp": 1, "tp": 1}
        assert report["cp_comm_strategy"] == "alltoall"

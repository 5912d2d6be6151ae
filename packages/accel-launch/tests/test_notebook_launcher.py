"""notebook_launcher: real forked processes joined by gloo, restarts, two machines on loopback,
the refusals of a parent that already holds a group or an accelerator, and bad arguments."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types

import pytest
import torch
from accel_state.testing import free_port, run_command

from accel_launch import notebook_launcher
from accel_launch.commands._notebook import check_parent_can_fork

from .conftest import SCRIPTS

SCRIPT = SCRIPTS / "notebook_launcher_checks.py"


def run_mode(mode: str, out, *extra: str, timeout: float = 240):
    return run_command([sys.executable, str(SCRIPT), mode, str(out), *extra], timeout=timeout)


def rows(out, tag: str) -> list[dict]:
    found = [json.loads(path.read_text()) for path in sorted(out.glob(f"{tag}-*.json"))]
    return sorted(found, key=lambda row: row["rank"])


def parent(stdout: str) -> dict:
    lines = [line[7:] for line in stdout.splitlines() if line.startswith("PARENT ")]
    assert len(lines) == 1, stdout
    return json.loads(lines[0])


def test_two_forked_processes_form_a_gloo_group_in_mixed_precision(tmp_path):
    result = run_mode("two", tmp_path, str(free_port()))
    found = rows(tmp_path, "two")
    assert [row["rank"] for row in found] == [0, 1], result.stdout + result.stderr
    for row in found:
        assert row["world"] == 2 and row["local_rank"] == row["rank"]
        assert row["distributed_type"] == "MULTI_CPU" and row["backend"] == "gloo"
        assert row["mixed_precision"] == "bf16"
        assert row["sum"] == 3.0  # 1 + 2: the all_reduce crossed both processes
        assert row["secret"] == "closure value" and not row["same_process"]
        assert row["fork_launched"] is True  # ACCEL_FORK_LAUNCHED, written by the launcher
    assert "Launching training on 2 CPU processes." in result.stdout


def test_one_process_runs_in_this_process(tmp_path):
    result = run_mode("in_process", tmp_path)
    (row,) = rows(tmp_path, "in_process")
    assert row["same_process"] and row["world"] == 1 and row["distributed_type"] == "NO"
    assert row["mixed_precision"] == "fp16" and row["fork_launched"] is False
    assert parent(result.stdout) == {"state_kept": True}
    assert "Launching training on one CPU in this process." in result.stdout


def test_a_failed_attempt_is_restarted_and_exhausted_restarts_raise(tmp_path):
    result = run_mode("restart", tmp_path, str(free_port()), str(free_port()))
    assert (tmp_path / "marker").read_text() == "failed once"
    found = rows(tmp_path, "restart")
    assert [row["rank"] for row in found] == [0, 1]
    assert {row["restart"] for row in found} == {"1"}  # both ran in the second attempt
    failure = parent(result.stdout)
    assert failure["error_type"] == "ChildFailedError"
    assert "this training function always fails" in failure["message"]


def test_two_machines_on_loopback_meet_through_the_static_rendezvous(tmp_path):
    port = str(free_port())
    command = [sys.executable, str(SCRIPT), "node", str(tmp_path), port]
    second = subprocess.Popen(
        [*command, "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        first = run_command([*command, "0"], timeout=240)
        out, _ = second.communicate(timeout=120)
    finally:
        if second.poll() is None:
            second.kill()
            second.wait()
    assert second.returncode == 0, out
    found = rows(tmp_path, "node")
    assert [row["rank"] for row in found] == [0, 1], first.stdout + first.stderr + out
    for row in found:
        assert row["world"] == 2 and row["local_rank"] == 0 and row["sum"] == 3.0
    assert "on node 0 of 2" in first.stdout and "on node 1 of 2" in out


def test_a_process_group_in_the_parent_is_refused(tmp_path):
    failure = parent(run_mode("parent_group", tmp_path).stdout)
    assert failure["error_type"] == "RuntimeError"
    message = failure["message"]
    assert "must not have one" in message and "backend 'gloo', world size 1" in message
    assert "destroy_process_group()" in message
    assert not list(tmp_path.glob("never-*.json"))


def test_an_accelerator_in_the_parent_is_refused(tmp_path):
    failure = parent(run_mode("parent_accelerator", tmp_path).stdout)
    assert failure["error_type"] == "ValueError"
    assert "already created in this process" in failure["message"]
    assert "only inside the function you pass to notebook_launcher" in failure["message"]


def test_default_on_a_cpu_machine_runs_in_this_process(monkeypatch):
    monkeypatch.delenv("ACCEL_MIXED_PRECISION", raising=False)
    seen = []
    notebook_launcher(
        lambda x: seen.append((x, os.getpid(), os.environ.get("ACCEL_MIXED_PRECISION"))),
        args=(5,),
        mixed_precision="BF16",
    )
    assert seen == [(5, os.getpid(), "bf16")]
    assert "ACCEL_MIXED_PRECISION" not in os.environ


def test_initialised_cuda_in_the_parent_is_refused(monkeypatch):
    # No GPU here: the driver's answer is replaced to reach the check before any fork.
    monkeypatch.setattr(torch.cuda, "is_initialized", lambda: True)
    with pytest.raises(RuntimeError, match="got CUDA already initialised in this process"):
        check_parent_can_fork("cuda")
    check_parent_can_fork("cpu")


def test_a_library_that_touches_the_device_on_import_is_refused(monkeypatch):
    monkeypatch.setitem(sys.modules, "bitsandbytes", types.ModuleType("bitsandbytes"))
    with pytest.raises(RuntimeError, match=r"got \['bitsandbytes'\] imported"):
        check_parent_can_fork("npu")
    check_parent_can_fork("cpu")


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mixed_precision": "fp32"}, r"mixed_precision must be one of .*got 'fp32'"),
        ({"num_processes": 0}, r"num_processes must be a positive integer; got 0"),
        (
            {"num_nodes": 2, "node_rank": 2},
            r"node_rank must be less than num_nodes; got node_rank=2",
        ),
        ({"node_rank": -1}, r"node_rank must be an integer >= 0; got -1"),
        ({"max_restarts": -1}, r"max_restarts must be an integer >= 0; got -1"),
        ({"num_nodes": 0}, r"num_nodes must be a positive integer; got 0"),
    ],
)
def test_bad_arguments_are_refused_before_anything_runs(kwargs, match):
    calls = []
    with pytest.raises(ValueError, match=match):
        notebook_launcher(calls.append, args=(1,), **kwargs)
    assert calls == []

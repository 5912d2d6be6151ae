"""SLURM detection, and the mpirun / deepspeed command lines built (no scheduler needed)."""

import base64
import json
import os
import shutil
import subprocess
import sys

import pytest

from accel_launch import ConfigError
from accel_launch._launch import build_command
from accel_launch.launchers._cluster import detect_slurm, expand_nodelist, read_hostfile

from .conftest import OPEN_MPI_ENV, SCRIPTS, accel, reports
from .test_engines import plan_for

# What srun sets in each task of `srun --nodes 2 --ntasks-per-node 1 accel launch ...`.
SRUN_PER_NODE = {
    "SLURM_JOB_ID": "81234",
    "SLURM_STEP_ID": "0",
    "SLURM_PROCID": "1",
    "SLURM_NODEID": "1",
    "SLURM_LOCALID": "0",
    "SLURM_NNODES": "2",
    "SLURM_NTASKS": "2",
    "SLURM_STEP_NUM_NODES": "2",
    "SLURM_STEP_NUM_TASKS": "2",
    "SLURM_JOB_NODELIST": "cn[007-008]",
    "SLURM_STEP_NODELIST": "cn[007-008]",
    "SLURM_GPUS_ON_NODE": "4",
}


def test_expand_nodelist():
    assert expand_nodelist("cn[007-009,012],login1") == [
        "cn007",
        "cn008",
        "cn009",
        "cn012",
        "login1",
    ]
    assert expand_nodelist("r[1-2]n[1-2]") == ["r1n1", "r1n2", "r2n1", "r2n2"]
    assert expand_nodelist("single") == ["single"]
    with pytest.raises(ConfigError, match="balanced brackets"):
        expand_nodelist("cn[1-2")


def test_slurm_only_under_srun():
    batch = {k: v for k, v in SRUN_PER_NODE.items() if not k.startswith("SLURM_STEP")}
    assert detect_slurm(batch) is None  # an sbatch script is not a step
    assert detect_slurm({**SRUN_PER_NODE, "ACCEL_IGNORE_SLURM": "1"}) is None
    step = detect_slurm(SRUN_PER_NODE)
    assert step is not None and step.hosts == ("cn007", "cn008") and not step.one_task_per_rank
    assert step.port == 20000 + 81234 % 10000


def test_srun_once_per_machine_sets_the_topology_itself():
    _, plan = plan_for("train.py", environ=SRUN_PER_NODE)
    c = plan.config
    assert (c.num_machines, c.machine_rank, c.main_process_ip) == (2, 1, "cn007")
    assert c.num_processes == 8  # 4 GPUs per machine x 2 machines (the total)
    assert plan.sources["machine_rank"] == "SLURM (SLURM_NODEID)"
    command = build_command(plan, ["train.py"], False, False, c.main_process_port)
    assert command.launcher == "torchrun"
    assert command.argv == [
        "--nproc_per_node=4",
        "--nnodes=2",
        "--max_restarts=0",
        "--monitor_interval=0.1",
        "--node_rank=1",
        "--master_addr=cn007",
        f"--master_port={21234}",
        "train.py",
    ]
    # Flags still win over what srun says.
    _, plan = plan_for(
        "--num_processes", "2", "--main_process_port", "29999", "t.py", environ=SRUN_PER_NODE
    )
    assert plan.config.num_processes == 2 and plan.config.main_process_port == 29999


def test_srun_one_task_per_rank_runs_the_script_directly():
    env = {**SRUN_PER_NODE, "SLURM_NTASKS": "8", "SLURM_STEP_NUM_TASKS": "8", "SLURM_PROCID": "5"}
    _, plan = plan_for("--mixed_precision", "bf16", "-m", "pkg.train", "--lr", "1", environ=env)
    assert plan.config.num_processes == 8
    command = build_command(plan, ["pkg.train", "--lr", "1"], True, False, 21234)
    assert command.launcher == "slurm-task"
    assert command.argv == [sys.executable, "-m", "pkg.train", "--lr", "1"]
    assert command.env["MASTER_ADDR"] == "cn007" and command.env["MASTER_PORT"] == "21234"
    assert command.env["ACCEL_MIXED_PRECISION"] == "bf16"
    with pytest.raises(ConfigError, match="srun started 8 tasks.*got --num_processes 4"):
        plan_for("--num_processes", "4", "t.py", environ=env)


@pytest.mark.multiprocess
def test_srun_one_task_per_rank_forms_the_world():
    """Two tasks on one machine, started the way srun starts them: each `accel launch` runs
    one rank, which finds its place through SLURM variables."""
    from accel_state.testing import free_port

    port = str(free_port())
    procs = []
    for rank in (0, 1):
        env = {
            **os.environ,
            **SRUN_PER_NODE,
            "SLURM_NTASKS": "2",
            "SLURM_STEP_NUM_TASKS": "2",
            "SLURM_NNODES": "1",
            "SLURM_STEP_NUM_NODES": "1",
            "SLURM_NODEID": "0",
            "SLURM_PROCID": str(rank),
            "SLURM_LOCALID": str(rank),
            "SLURM_NTASKS_PER_NODE": "2",
            "SLURM_JOB_NODELIST": "localhost",
            "SLURM_STEP_NODELIST": "localhost",
        }
        command = [
            sys.executable,
            "-m",
            "accel_launch.cli",
            "launch",
            "--main_process_port",
            port,
            "--mixed_precision",
            "fp16",
            str(SCRIPTS / "report_env.py"),
        ]
        procs.append(
            subprocess.Popen(
                command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
        )
    outs = []
    try:
        for proc in procs:
            out, err = proc.communicate(timeout=150)
            assert proc.returncode == 0, err
            outs.append(out)
    finally:
        for proc in procs:
            proc.kill()
    rows = reports("".join(outs))
    assert [r["process_index"] for r in rows] == [0, 1]
    assert all(r["num_processes"] == 2 and r["RANK"] is None for r in rows)
    assert all(r["ACCEL_MIXED_PRECISION"] == "fp16" for r in rows)


def test_mpirun_command_line(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("# two machines\nnode1 slots=2\nnode2 slots=2\n")
    assert read_hostfile(hostfile) == [("node1", 2), ("node2", 2)]
    _, plan = plan_for(
        "--mpirun_hostfile",
        str(hostfile),
        "--num_processes",
        "4",
        "--num_machines",
        "2",
        "--main_process_ip",
        "node1",
        "--cpu",
        "t.py",
        "--x",
        "1",
    )
    os.environ["ACCEL_MPI_FLAVOUR"] = "openmpi"
    try:
        command = build_command(plan, ["t.py", "--x", "1"], False, False, 29500)
        os.environ["ACCEL_MPI_FLAVOUR"] = "mpich"
        hydra = build_command(plan, ["t.py", "--x", "1"], False, False, 29500)
    finally:
        del os.environ["ACCEL_MPI_FLAVOUR"]
    argv = command.argv
    assert argv[:7] == ["mpirun", "--hostfile", str(hostfile), "-np", "4", "--npernode", "2"]
    assert ["-x", "MASTER_ADDR"] == argv[
        argv.index("MASTER_ADDR") - 1 : argv.index("MASTER_ADDR") + 1
    ]
    assert argv[-3:] == ["t.py", "--x", "1"] and argv[-4] == sys.executable
    assert (
        command.env["MASTER_ADDR"] == "node1"
        and command.env["ACCEL_DISTRIBUTED_TYPE"] == "MULTI_CPU"
    )
    assert hydra.argv[:7] == ["mpirun", "-f", str(hostfile), "-n", "4", "-ppn", "2"]
    i = hydra.argv.index("MASTER_PORT")
    assert hydra.argv[i - 1 : i + 2] == ["-genv", "MASTER_PORT", "29500"]


@pytest.mark.multiprocess
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
def test_mpirun_runs_two_ranks(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    env = OPEN_MPI_ENV
    out = accel(
        "launch",
        "--mpirun_hostfile",
        str(hostfile),
        "--num_processes",
        "2",
        "--cpu",
        "--mixed_precision",
        "bf16",
        str(SCRIPTS / "report_env.py"),
        env=env,
        timeout=150,
    ).stdout
    rows = reports(out)
    assert [r["process_index"] for r in rows] == [0, 1]
    assert all(r["num_processes"] == 2 and r["ACCEL_MIXED_PRECISION"] == "bf16" for r in rows)
    assert all(r["RANK"] is None for r in rows)  # ranks came from Open MPI, not torchrun


def test_deepspeed_multi_machine_command_line(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("w1 slots=4\nw2 slots=4\n")
    common = (
        "--use_deepspeed",
        "--zero_stage",
        "2",
        "--num_machines",
        "2",
        "--num_processes",
        "8",
        "--main_process_ip",
        "w1",
        "--deepspeed_hostfile",
        str(hostfile),
    )
    _, plan = plan_for(*common, "--deepspeed_multinode_launcher", "slurm", "t.py", "--lr", "1")
    command = build_command(plan, ["t.py", "--lr", "1"], False, False, 29500)
    assert command.launcher == "deepspeed"
    packed = command.argv[command.argv.index("accel_launch._child") + 1]
    assert command.argv == [
        "deepspeed",
        "--hostfile",
        str(hostfile),
        "--num_nodes",
        "2",
        "--num_gpus",
        "4",
        "--master_addr",
        "w1",
        "--master_port",
        "29500",
        "--launcher",
        "slurm",
        "--no_local_rank",
        "--module",
        "accel_launch._child",
        packed,
        "t.py",
        "--lr",
        "1",
    ]
    env = json.loads(base64.urlsafe_b64decode(packed))
    assert env["ACCEL_USE_DEEPSPEED"] == "1" and env["ACCEL_DEEPSPEED_ZERO_STAGE"] == "2"
    # Filters replace the node / GPU counts (DeepSpeed refuses both together).
    _, plan = plan_for(*common, "--deepspeed_inclusion_filter", "w1:0,1@w2", "t.py")
    argv = build_command(plan, ["t.py"], False, False, 29500).argv
    assert argv[3:5] == ["--include", "w1:0,1@w2"] and "--num_nodes" not in argv
    assert argv[argv.index("--launcher") + 1] == "pdsh"
    # `standard` starts torchrun on each machine instead.
    _, plan = plan_for(*common, "--deepspeed_multinode_launcher", "standard", "t.py")
    assert build_command(plan, ["t.py"], False, False, 29500).launcher == "torchrun"
    # Only machine 0 starts DeepSpeed's launcher; a hostfile is required.
    _, plan = plan_for(*common, "--machine_rank", "1", "t.py")
    with pytest.raises(ConfigError, match="starts every machine from machine 0"):
        build_command(plan, ["t.py"], False, False, 29500)


def test_deepspeed_launcher_missing_is_a_clear_error(tmp_path):
    hostfile = tmp_path / "hostfile"
    hostfile.write_text("w1 slots=1\nw2 slots=1\n")
    empty_bin = tmp_path / "bin"
    empty_bin.mkdir()
    r = accel(
        "launch",
        "--use_deepspeed",
        "--num_machines",
        "2",
        "--num_processes",
        "2",
        "--main_process_ip",
        "w1",
        "--deepspeed_hostfile",
        str(hostfile),
        "t.py",
        env={"PATH": str(empty_bin)},  # no `deepspeed` command, even where it is installed
        check=False,
    )
    assert r.returncode == 2 and "needs the `deepspeed` command" in r.stderr
    assert "pip install deepspeed" in r.stderr


def test_child_bootstrap_sets_the_packed_environment(tmp_path):
    from accel_launch.launchers._cluster import encode_environment

    script = tmp_path / "show.py"
    script.write_text("import os, sys; print(os.environ['ACCEL_X'], sys.argv[1:], __name__)")
    packed = encode_environment({"ACCEL_X": "42"})
    out = subprocess.run(
        [sys.executable, "-m", "accel_launch._child", packed, str(script), "--a", "b"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    assert out.strip() == "42 ['--a', 'b'] __main__"


# What an `sbatch --ntasks=2` script of one machine sees (no step: srun was not called).
SBATCH_ONE_MACHINE = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NUM_NODES": "1",
    "SLURM_NNODES": "1",
    "SLURM_NTASKS": "2",
    "SLURM_PROCID": "0",
    "SLURM_JOB_NODELIST": "localhost",
}


def test_batch_script_of_one_machine_takes_its_processes_from_the_job():
    _, plan = plan_for("train.py", environ=SBATCH_ONE_MACHINE)
    c = plan.config
    assert (c.num_processes, c.num_machines, c.main_process_port) == (2, 1, 24242)
    assert plan.sources["num_processes"] == "SLURM (SLURM_NTASKS of the batch job)"
    assert plan.slurm is None  # not a step: the launcher starts the processes (torchrun)
    _, flagged = plan_for("--num_processes", "1", "train.py", environ=SBATCH_ONE_MACHINE)
    assert flagged.config.num_processes == 1  # a flag still wins
    off = {**SBATCH_ONE_MACHINE, "ACCEL_IGNORE_SLURM": "1"}
    assert plan_for("train.py", environ=off)[1].config.num_processes == 1


def test_batch_script_of_several_machines_is_refused_with_the_srun_command():
    env = {**SBATCH_ONE_MACHINE, "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2"}
    with pytest.raises(ConfigError, match="holds 2 machines. Start one launcher per machine"):
        plan_for("train.py", environ=env)
    _, plan = plan_for(
        "--num_machines", "2", "--main_process_ip", "cn1", "--num_processes", "2", "train.py",
        environ=env,
    )  # fmt: skip
    assert plan.config.num_machines == 2  # the user drives the topology by flags

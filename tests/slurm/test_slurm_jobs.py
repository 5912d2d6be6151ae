"""Real SLURM jobs on a one-node cluster (slurmctld + slurmd + munge, started once per session
from tools/slurm_cluster.py and stopped at the end, also when a test fails): srun in both
shapes, sbatch with the topology read from the job, the multi-machine template of
examples/slurm run as one machine, and the mpirun example."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

pytestmark = [pytest.mark.multiprocess, pytest.mark.slow]
ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "slurm"


def _cluster_module():
    spec = importlib.util.spec_from_file_location("slurm_cluster", ROOT / "tools/slurm_cluster.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A started cluster; its ``env`` points SLURM's commands at it."""
    tool = _cluster_module()
    missing = tool.missing_commands()
    if missing:
        pytest.skip(f"SLURM is not installed (missing {', '.join(missing)}). {tool.INSTALL_HINT}")
    if os.geteuid() != 0:
        pytest.skip("the test cluster runs its daemons as root; these tests run as another user")
    cluster = tool.SlurmCluster(tmp_path_factory.mktemp("slurm-cluster"), cpus=2)
    with cluster:
        yield cluster


@pytest.fixture
def local_env(tmp_path):
    """This interpreter's ``accel`` first on PATH, and no default config file."""
    bin_dir = str(Path(sys.executable).parent)
    return {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
        "ACCEL_CONFIG_HOME": str(tmp_path / "config-home"),
    }


@pytest.fixture
def job_env(slurm_cluster, local_env):
    """Environment of a submitted job: :func:`local_env` pointed at the test cluster."""
    return {**local_env, **slurm_cluster.env}


TRAIN = str(EXAMPLES / "train.py")


def results(text: str) -> list[dict]:
    # Two ranks may write into one line of the shared output: decode each object after its tag.
    decoder = json.JSONDecoder()
    rows = [decoder.raw_decode(text, found.end())[0] for found in re.finditer(r"RESULT ", text)]
    return sorted(rows, key=lambda row: row["rank"])


def check_two_ranks(rows: list[dict], launcher: str, text: str) -> None:
    assert [row["rank"] for row in rows] == [0, 1], text
    assert all(row["world_size"] == 2 and row["launcher"] == launcher for row in rows), text
    assert all(row["last_loss"] < row["first_loss"] / 4 for row in rows), text
    assert rows[0]["last_loss"] == rows[1]["last_loss"]  # one model trained by both ranks


def test_srun_one_task_starts_two_processes(job_env):
    """`srun -n1 accel launch --num_processes 2`: the launcher starts both ranks (torchrun)."""
    out = run_command(
        ["srun", "-N1", "-n1", "-c2", "accel", "launch", "--num_processes", "2", TRAIN],
        env=job_env,
        timeout=240,
    )
    rows = results(out.stdout)
    check_two_ranks(rows, "torchrun", out.stdout + out.stderr)
    assert rows[0]["slurm_job_id"] == rows[1]["slurm_job_id"] is not None


def test_srun_two_tasks_are_the_two_ranks(job_env):
    """`srun -n2 accel launch`: srun starts every rank; each finds its place in SLURM's
    variables and the launcher runs the script in place, with no flag."""
    out = run_command(["srun", "-n2", "accel", "launch", TRAIN], env=job_env, timeout=240)
    check_two_ranks(results(out.stdout), "srun", out.stdout + out.stderr)
    assert out.stderr.count("via slurm-task") == 2


def test_srun_two_tasks_refuses_another_process_count(job_env):
    out = run_command(
        ["srun", "-n2", "accel", "launch", "--num_processes", "4", TRAIN],
        env=job_env,
        timeout=120,
        check=False,
    )
    assert out.returncode != 0
    assert "srun started 2 tasks, one per rank" in out.stderr
    assert "got --num_processes 4" in out.stderr and "Drop --num_processes" in out.stderr


def test_sbatch_without_topology_flags(job_env, tmp_path):
    """A batch script calls `accel launch train.py`: 2 processes from `--ntasks=2`."""
    output = tmp_path / "job.out"
    run_command(
        ["sbatch", "--wait", f"--output={output}", str(EXAMPLES / "submit_detected.sh")],
        env=job_env,
        cwd=EXAMPLES,
        timeout=300,
    )
    text = output.read_text()
    check_two_ranks(results(text), "torchrun", text)
    assert "2 processes on 1 machine via torchrun" in text


def test_sbatch_multinode_template_on_one_machine(job_env, tmp_path):
    """examples/slurm/submit_multinode.sh, submitted as one machine: srun starts one launcher,
    given --num_machines/--machine_rank/--main_process_ip from SLURM."""
    output = tmp_path / "multinode.out"
    run_command(
        [
            "sbatch",
            "--wait",
            "--nodes=1",
            f"--output={output}",
            str(EXAMPLES / "submit_multinode.sh"),
            "--steps",
            "20",
        ],
        env=job_env,
        cwd=EXAMPLES,
        timeout=300,
    )
    text = output.read_text()
    check_two_ranks(results(text), "torchrun", text)


def test_sbatch_script_of_several_machines_refuses_a_launch_outside_srun(local_env):
    """What a batch script of a 2-machine job sees: one launcher there would leave the second
    machine idle, so it stops with the fix."""
    env = {**local_env, "SLURM_JOB_ID": "77", "SLURM_JOB_NUM_NODES": "2", "SLURM_NNODES": "2"}
    env["SLURM_JOB_NODELIST"] = "cn[1-2]"
    out = run_command(["accel", "launch", TRAIN], env=env, timeout=120, check=False)
    assert out.returncode != 0
    assert "runs on the first machine of its job only" in out.stderr
    assert "holds 2 machines" in out.stderr and "srun --ntasks-per-node=1" in out.stderr


@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
@pytest.mark.parametrize("way", ["direct", "hostfile"])
def test_mpirun_example(way, local_env, tmp_path):
    """examples/slurm/mpirun.sh: `mpirun -np 2 python train.py`, and accel launch with a
    hostfile; the ranks come from Open MPI's variables."""
    from accel_state.testing import free_port

    env = {**local_env, "MASTER_PORT": str(free_port()), "HOSTFILE": str(tmp_path / "hosts")}
    out = run_command(
        ["bash", str(EXAMPLES / "mpirun.sh"), way, "--steps", "20"], env=env, timeout=240
    )
    check_two_ranks(results(out.stdout), "mpirun", out.stdout + out.stderr)

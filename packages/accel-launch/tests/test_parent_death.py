"""`kill -9` of `accel launch` takes its processes with it (Linux): none is left orphaned."""

import os
import shutil
import signal
import subprocess
import sys
import time

import pytest

from .conftest import OPEN_MPI_ENV, SCRIPTS

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="parent-death signals are a Linux feature"
)
LAUNCH = [sys.executable, "-m", "accel_launch.cli", "launch"]


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie waiting for its reaper has ended
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def _wait_for_pids(folder, count: int, proc: subprocess.Popen, timeout: float = 180) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        files = list(folder.glob("*.pid"))
        if len(files) == count:
            time.sleep(0.2)  # each file is written in one call; let the last one land
            return [int(f.read_text()) for f in files]
        if proc.poll() is not None:
            raise AssertionError(f"the launcher ended first: {proc.communicate()}")
        time.sleep(0.2)
    raise AssertionError(f"saw {len(list(folder.glob('*.pid')))} of {count} workers start")


def _kill_launcher_and_check(args: list[str], workers: int, tmp_path, env=None) -> None:
    folder = tmp_path / "pids"
    folder.mkdir()
    proc = subprocess.Popen(
        [*LAUNCH, *args, str(SCRIPTS / "sleep_forever.py")],
        env={**os.environ, "PID_DIR": str(folder), **(env or {})},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    pids: list[int] = []
    try:
        pids = _wait_for_pids(folder, workers, proc)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while any(_alive(pid) for pid in pids) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not [pid for pid in pids if _alive(pid)], "workers outlived their launcher"
    finally:
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=30)


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
@pytest.mark.parametrize("tie", ["setpriv", "preexec_fn"])
def test_workers_of_torchrun_die_with_the_launcher(tmp_path, tie):
    # Workers are tied through util-linux's setpriv when it is on PATH, else by a preexec_fn.
    if tie == "setpriv" and shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    env = {} if tie == "setpriv" else {"PATH": os.path.dirname(sys.executable)}
    _kill_launcher_and_check(["--cpu", "--num_processes", "2"], 2, tmp_path, env=env)


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_the_one_process_dies_with_the_launcher(tmp_path):
    _kill_launcher_and_check(["--num_processes", "1"], 1, tmp_path)


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
def test_a_slurm_task_dies_with_the_launcher(tmp_path):
    """srun started every rank: `accel launch` runs its one rank as a child."""
    slurm = {
        "SLURM_JOB_ID": "7",
        "SLURM_STEP_ID": "0",
        "SLURM_PROCID": "0",
        "SLURM_NODEID": "0",
        "SLURM_NTASKS": "2",
        "SLURM_STEP_NUM_TASKS": "2",
        "SLURM_STEP_NUM_NODES": "1",
        "SLURM_LOCALID": "0",
        "SLURM_STEP_NODELIST": "localhost",
    }
    _kill_launcher_and_check(["--cpu"], 1, tmp_path, env=slurm)


@pytest.mark.multiprocess
@pytest.mark.timeout(300)
@pytest.mark.skipif(shutil.which("mpirun") is None, reason="mpirun is not installed")
def test_mpirun_ranks_die_with_the_launcher(tmp_path):
    hostfile = tmp_path / "hosts"
    hostfile.write_text("localhost slots=2\n")
    env = OPEN_MPI_ENV
    args = ["--mpirun_hostfile", str(hostfile), "--num_processes", "2", "--cpu"]
    _kill_launcher_and_check(args, 2, tmp_path, env=env)

"""A process that used the process group exits 0 reliably (no SIGABRT from gloo at exit)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from accel_state.testing import free_port

SCRIPT = Path(__file__).parent / "scripts" / "teardown_script.py"
RUNS = 20


def _start_pair() -> list[subprocess.Popen]:
    port = free_port()
    procs = []
    for rank in range(2):
        env = {
            **os.environ,
            "RANK": str(rank),
            "WORLD_SIZE": "2",
            "LOCAL_RANK": str(rank),
            "LOCAL_WORLD_SIZE": "2",
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
            "OMP_NUM_THREADS": "1",
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, str(SCRIPT)],
                env=env,
                text=True,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
            )
        )
    return procs


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(1200)  # 40 interpreter starts: minutes on a loaded 2-core machine
def test_twenty_runs_exit_cleanly():
    failures = []
    for run in range(RUNS):
        procs = _start_pair()
        for rank, proc in enumerate(procs):
            try:
                out, err = proc.communicate(timeout=60)
            except subprocess.TimeoutExpired:
                for p in procs:
                    p.kill()
                failures.append((run, rank, "timeout", ""))
                continue
            if proc.returncode != 0 or f"done {rank}" not in out:
                failures.append((run, rank, proc.returncode, err[-500:]))
    assert not failures, f"{len(failures)} failed exits out of {2 * RUNS}: {failures[:3]}"


@pytest.mark.multiprocess
@pytest.mark.skipif(not Path("/proc/self/task").is_dir(), reason="reads thread names from /proc")
def test_teardown_frees_a_group_captured_by_torch_defaults():
    from accel_state.testing import run_distributed

    script = Path(__file__).parent / "scripts" / "captured_group_script.py"
    run = run_distributed(script, num_processes=2, timeout=180)
    for rank in (0, 1):
        assert f"RANK {rank} THREADS BEFORE ['gloo" in run.stdout, run.stdout
        assert f"RANK {rank} THREADS AFTER []" in run.stdout, run.stdout

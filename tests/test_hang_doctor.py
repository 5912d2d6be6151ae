"""The hang doctor: when a process stops taking part, every process reports within seconds
(who is stuck, in which collective, every stack) and the job exits non-zero, on 2 real gloo
processes started by ``accel launch``."""

import re
import shutil
import sys
import time
from pathlib import Path

import pytest
from accel_state.hang_watchdog import HANG_EXIT_CODE
from accel_state.testing import run_command

SCRIPT = Path(__file__).parent / "scripts" / "hang_script.py"
TIMEOUT = 10.0


def _launch(mode: str, config: str, *flags: str, env: dict[str, str] | None = None) -> str:
    """Run the script; check it failed within twice the timeout of the hang; return its output."""
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--cpu", "--num_processes", "2", *flags, str(SCRIPT), mode, config]
    result = run_command(command, timeout=300, env=env, check=False)
    ended = time.time()
    out = result.stdout + result.stderr
    start = re.search(r"HANG_START ([\d.]+)", out)
    assert start, out
    assert result.returncode != 0, out
    took = ended - float(start.group(1))
    assert took < 2 * TIMEOUT, (took, out)
    return out


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_rank_sleeping_forever_is_named_with_every_stack():
    out = _launch("sleep", "env", "--hang_timeout", str(TIMEOUT))
    assert f"rank 0 waited more than {TIMEOUT:g} s in gather #" in out, out
    assert "STUCK: rank 1 is not in a collective (after gather #" in out, out
    assert "--- rank 0: in gather #" in out and "shapes [2, 3]" in out, out
    assert "--- rank 1: outside any collective" in out, out
    assert "in sleep_forever" in out, out  # rank 1's own stack, dumped from inside
    assert f"exit code {HANG_EXIT_CODE} (stopped by the hang doctor" in out, out


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_rank_skipping_a_gather_is_reported_from_both_sides():
    out = _launch("skip", "env", env={"ACCEL_HANG_TIMEOUT": str(TIMEOUT)})
    assert "a process skipped or added a collective" in out, out
    # Rank 0 makes its 4th gather while rank 1, which made 3, waits at the closing barrier.
    assert re.search(r"--- rank 0: in gather #\d+, shapes \[2, 3\]", out), out
    assert re.search(r"--- rank 1: in barrier #\d+.*'gather': 3", out), out
    assert "in wait_for_everyone" in out and "gather(x)" in out, out


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_killed_peer_is_named_by_the_launcher_and_the_survivor_says_where_it_waited():
    out = _launch("kill", "kwargs")
    assert "process of global rank 1 failed with exit code -9 (killed by signal 9" in out, out
    assert "rank 0 was in barrier #" in out, out
    assert "in wait_for_everyone" in out, out


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_process_group_timeout_configures_the_watchdog():
    out = _launch("sleep", "kwargs")
    # 80 % of the process group's 10 s, so the report comes before gloo's own timeout error.
    assert "rank 0 waited more than 8 s in gather #" in out, out
    assert "Timed out waiting" not in out, out

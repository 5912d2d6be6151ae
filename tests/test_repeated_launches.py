"""50 consecutive 2-process launches of a job with collectives and checkpoints all exit 0, with
no ``terminate called`` abort from gloo's threads at exit.

One launch costs two interpreter starts (about 7 s on an idle 2-core machine, a minute under
load), so the 50 take minutes: the test runs when ``ACCEL_TEST_FIFTY_LAUNCHES=1``. The suite
always runs the 20 pairs of ``packages/accel-state/tests/test_teardown.py``.
"""

import os
import shutil
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

SCRIPT = Path(__file__).parent / "scripts" / "collectives_and_checkpoint.py"
RUNS = 50


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.skipif(
    os.environ.get("ACCEL_TEST_FIFTY_LAUNCHES", "0") != "1",
    reason="50 launches take minutes; set ACCEL_TEST_FIFTY_LAUNCHES=1 to run them",
)
@pytest.mark.timeout(3600)  # 100 interpreter starts: many minutes on a loaded 2-core machine
def test_fifty_launches_exit_cleanly(tmp_path):
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    failures = []
    for run in range(RUNS):
        command = [launcher, "--cpu", "--num_processes", "2", str(SCRIPT), str(tmp_path)]
        result = run_command(command, timeout=180, check=False)
        out = result.stdout + result.stderr
        clean = result.returncode == 0 and "done 0" in out and "done 1" in out
        if not clean or "terminate called" in out:
            failures.append((run, result.returncode, out[-800:]))
    assert not failures, f"{len(failures)} of {RUNS} launches failed: {failures[:2]}"
    # Every launch resumed the previous one's checkpoint and saved the next.
    assert len(list((tmp_path / "checkpoints").iterdir())) == RUNS

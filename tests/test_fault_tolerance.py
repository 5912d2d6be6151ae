"""A job that loses a process resumes from its newest complete checkpoint and ends exactly as
an uninterrupted job: ``accel launch --max_restarts 1`` on 2 real gloo processes, one of them
SIGKILLed mid-training (after a step, during a save, the main process)."""

import os
import shutil
import sys
from pathlib import Path

import pytest
import torch
from accel_state.testing import run_command
from safetensors.torch import load_file

SCRIPT = Path(__file__).parent / "scripts" / "restartable_training.py"
STEPS = 12


def _launch(project: Path, processes: int = 2, **env: str) -> str:
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--cpu", "--num_processes", str(processes), "--max_restarts", "1"]
    project.mkdir(parents=True, exist_ok=True)
    result = run_command([*command, str(SCRIPT), str(project)], timeout=400, env=env)
    return result.stdout + result.stderr


def _seen(project: Path) -> dict[int, list[int]]:
    """Sample indices each step trained on (all processes), from the last attempt that ran it."""
    steps: dict[int, dict[int, tuple[int, list[int]]]] = {}
    for log in sorted(project.glob("batches_*.log")):
        for line in log.read_text().splitlines():
            attempt, rank, step, *indices = (int(v) for v in line.split())
            previous = steps.setdefault(step, {}).get(rank)
            if previous is None or previous[0] <= attempt:
                steps[step][rank] = (attempt, indices)
    return {
        step: sorted(i for _, indices in by_rank.values() for i in indices)
        for step, by_rank in steps.items()
    }


@pytest.fixture(scope="module")
def baseline(tmp_path_factory) -> Path:
    project = tmp_path_factory.mktemp("uninterrupted")
    _launch(project)
    return project


def _assert_same_run(project: Path, baseline: Path, exact: bool = True) -> None:
    final, expected = (
        load_file(project / "final.safetensors"),
        load_file(baseline / "final.safetensors"),
    )
    for name, tensor in expected.items():
        if exact:
            assert torch.equal(final[name], tensor), name
        else:
            torch.testing.assert_close(final[name], tensor)
    seen = _seen(project)
    assert sorted(seen) == list(range(STEPS))
    assert seen == _seen(baseline)


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(900)
@pytest.mark.parametrize(
    ("rank", "step", "during"),
    [("1", "7", "step"), ("1", "6", "save"), ("0", "4", "step")],
    ids=["rank1-mid-epoch", "rank1-during-save", "rank0"],
)
def test_killed_process_restarts_and_resumes_bit_identical(tmp_path, baseline, rank, step, during):
    out = _launch(tmp_path, FT_KILL_RANK=rank, FT_KILL_STEP=step, FT_KILL_DURING=during)
    assert "attempt 1 rank 0 resumes at step" in out, out
    assert "attempt 1 rank 1 resumes at step" in out, out
    assert "starting fresh" in out  # attempt 0 found no checkpoint
    _assert_same_run(tmp_path, baseline)
    if during == "save":
        # The interrupted save left no folder that counts as a checkpoint; the restart
        # resumed from the one before it and wrote checkpoint_1 again.
        assert "attempt 1 rank 0 resumes at step 3" in out, out
    assert not list((tmp_path / "checkpoints").glob(".*partial"))


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(900)
def test_job_stopped_on_two_processes_resumes_on_one(tmp_path, baseline):
    _launch(tmp_path, FT_STOP_STEP="6")
    out = _launch(tmp_path, processes=1)
    assert "resumes at step 6" in out, out
    # Same samples per step; the gradients are averaged in another order, hence closeness.
    _assert_same_run(tmp_path, baseline, exact=False)
    assert os.path.isfile(tmp_path / "final.safetensors")

"""Every collective on real gloo processes, with exact expected values on every process."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel_state.testing import run_distributed

SCRIPTS = Path(__file__).parent / "scripts"

pytestmark = pytest.mark.multiprocess


def _assert_all_ranks_ok(stdout: str, num_processes: int) -> None:
    for rank in range(num_processes):
        assert f"RANK {rank} OK" in stdout, stdout


def test_collectives_on_two_processes() -> None:
    result = run_distributed(
        SCRIPTS / "worker_ops.py", "2", num_processes=2, timeout=150, env={"ACCEL_DEBUG_MODE": "0"}
    )
    _assert_all_ranks_ok(result.stdout, 2)


def test_debug_mode_raises_on_every_process_instead_of_hanging() -> None:
    result = run_distributed(
        SCRIPTS / "worker_debug.py",
        "2",
        num_processes=2,
        timeout=150,
        env={"ACCEL_DEBUG_MODE": "1"},
    )
    _assert_all_ranks_ok(result.stdout, 2)


def test_collectives_of_parameters_views_and_requires_grad_tensors() -> None:
    result = run_distributed(
        SCRIPTS / "worker_params.py",
        "2",
        num_processes=2,
        timeout=150,
        env={"ACCEL_DEBUG_MODE": "0"},
    )
    _assert_all_ranks_ok(result.stdout, 2)
    for rank in range(2):
        assert f"RANK {rank} CAUSE NAMED" in result.stdout, result.stdout

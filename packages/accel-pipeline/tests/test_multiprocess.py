"""prepare_pippy on 2 real gloo processes (one run holds every check to bound start-up costs)."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel_state.testing import run_distributed

pytestmark = pytest.mark.multiprocess

CHECKS = ["auto", "explicit_gather_chunks4", "kwargs_and_errors", "untraceable", "done"]


def test_pipeline_on_two_processes() -> None:
    result = run_distributed(
        Path(__file__).parent / "scripts" / "pipeline_worker.py", num_processes=2, timeout=400
    )
    for check in CHECKS:
        for rank in (0, 1):
            assert f"RANK {rank} OK {check}" in result.stdout, result.stdout

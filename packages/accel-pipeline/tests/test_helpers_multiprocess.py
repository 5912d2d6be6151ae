"""build_pipeline and pippy_forward on 2 real gloo processes (one run holds every check)."""

from __future__ import annotations

from pathlib import Path

import pytest
from accel_state.testing import run_distributed

pytestmark = pytest.mark.multiprocess


def test_build_pipeline_and_pippy_forward_on_two_processes() -> None:
    result = run_distributed(
        Path(__file__).parent / "scripts" / "helpers_worker.py", num_processes=2, timeout=300
    )
    for check in ("gathered", "padded_last_only", "refusals"):
        for rank in (0, 1):
            assert f"RANK {rank} OK {check}" in result.stdout, result.stdout + result.stderr

"""Checks that need real processes: 2 gloo processes through torchrun."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from accel_state.testing import run_distributed

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.mark.multiprocess
def test_gather_for_metrics_exact_and_resume_on_two_processes() -> None:
    result = run_distributed(SCRIPTS / "metrics_and_resume.py", num_processes=2, timeout=240)
    summaries = dict(re.findall(r"rank (\d): (\d+) gather cases, 0 failures", result.stdout))
    assert set(summaries) == {"0", "1"}, result.stdout
    assert all(int(count) > 1000 for count in summaries.values()), summaries
    assert "FAIL" not in result.stdout, result.stdout


@pytest.mark.multiprocess
def test_prepare_data_loader_shards_by_device_mesh_on_two_processes() -> None:
    result = run_distributed(SCRIPTS / "mesh_sharding.py", num_processes=2, timeout=180)
    # The two processes' lines may interleave without a newline between them.
    lines = re.findall(
        r"rank \d: mesh (tp|dp_shard): (ok|[^\n]*?(?=rank \d: |\n|$))", result.stdout
    )
    assert sorted(lines) == sorted([("tp", "ok"), ("dp_shard", "ok")] * 2), result.stdout


@pytest.mark.multiprocess
def test_shuffle_follows_the_callers_generator_on_two_processes() -> None:
    result = run_distributed(SCRIPTS / "generator_order.py", num_processes=2, timeout=180)
    # The two processes' lines may interleave without a newline between them.
    lines = re.findall(
        r"rank \d: (seeded apart|reseeded): (ok|[^\n]*?(?=rank \d: |\n|$))", result.stdout
    )
    assert sorted(lines) == sorted([("seeded apart", "ok"), ("reseeded", "ok")] * 2), result.stdout

from pathlib import Path

import pytest
from accel_state.testing import run_distributed

SCRIPTS = Path(__file__).parent / "scripts"
CHECKS = [
    "engine_without_accelerator",
    "split_batches_parity",
    "accumulation_parity",
    "no_sync",
    "gather_for_metrics",
    "triggers_and_reduce",
    "join_uneven_inputs",
    "one_tracker_run",
    "step_matches_hand_written_ddp",
]


@pytest.mark.multiprocess
def test_accelerator_on_two_processes(tmp_path):
    pytest.importorskip("tensorboardX", reason="the tracker check needs tensorboardX")
    result = run_distributed(SCRIPTS / "ddp_checks.py", str(tmp_path), num_processes=2, timeout=240)
    for name in CHECKS:
        assert f"PASSED check_{name}" in result.stdout, result.stdout + result.stderr

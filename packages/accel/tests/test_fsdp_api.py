"""The reference's FSDP checkpoint functions on 2 real gloo processes (one launch): save and
load a trained FSDP2 model and optimizer in both layouts, merge the sharded one, and refuse bad
input on every process without hanging."""

from pathlib import Path

import pytest
from accel_state.testing import run_distributed

SCRIPT = Path(__file__).parent / "scripts" / "fsdp_api.py"


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
def test_fsdp_checkpoint_functions_round_trip_on_two_processes(tmp_path):
    result = run_distributed(SCRIPT, str(tmp_path), num_processes=2, timeout=300)
    for check in ("round_trip", "merge", "refusals"):
        for rank in (0, 1):
            assert f"PASSED check_{check} rank {rank}" in result.stdout, (
                result.stdout + result.stderr
            )

"""PrepareForLaunch: processes started by torch.multiprocessing get their ranks from the index,
form a gloo group (debug joins it before the state does), and a bad distributed type is refused."""

from __future__ import annotations

import json
import sys

import pytest
from accel_state.testing import free_port, run_command

from accel_launch import PrepareForLaunch

from .conftest import SCRIPTS

SCRIPT = SCRIPTS / "prepare_for_launch_checks.py"


def rows(out, mode: str, timeout: float = 180) -> list[dict]:
    result = run_command(
        [sys.executable, str(SCRIPT), mode, str(out), str(free_port())], timeout=timeout
    )
    found = [json.loads(path.read_text()) for path in sorted(out.glob(f"{mode}-*.json"))]
    assert len(found) == 2, result.stdout + result.stderr
    return found


@pytest.mark.parametrize("mode", ["multi", "debug"])
def test_two_processes_form_a_gloo_group(tmp_path, mode: str) -> None:
    found = sorted(rows(tmp_path, mode), key=lambda row: row["rank"])
    for index, row in enumerate(found):
        assert row["rank"] == index and row["rank_env"] == row["local_rank_env"] == str(index)
        assert row["world"] == 2 and row["sum"] == 3.0
        assert row["fork_launched"] is True
        assert row["grouped_before_state"] is (mode == "debug")


def test_the_rank_counts_the_processes_of_the_machines_before(tmp_path) -> None:
    found = sorted(rows(tmp_path, "ranks"), key=lambda row: row["rank_env"])
    # NPROC=2 processes per machine, NODE_RANK=3: global ranks 6 and 7, local 0 and 1.
    assert [(r["rank_env"], r["local_rank_env"]) for r in found] == [("6", "0"), ("7", "1")]
    assert {r["fork_launched"] for r in found} == {"1"}


def test_a_bad_distributed_type_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match=r"one of \['NO', 'MULTI_CPU'.*got 'MULTI_CPUS'"):
        PrepareForLaunch(print, distributed_type="MULTI_CPUS")

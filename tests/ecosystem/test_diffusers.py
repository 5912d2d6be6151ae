"""diffusers' ``from_pretrained(device_map=...)`` on accel: a budget smaller than the model
spills to disk by itself, as on the reference, and the outputs equal the in-memory model's.

The script runs once per library in a fresh interpreter (``ACCEL_AS_ACCELERATE=1`` for accel,
the reference from the ``bench`` group otherwise); each test reads its case.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

SCRIPT = str(Path(__file__).parent / "scripts" / "diffusers_run.py")


@pytest.fixture(scope="module")
def runs(eco: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    eco.require("diffusers", "accelerate")
    ours = eco.run(
        [sys.executable, SCRIPT, str(tmp_path_factory.mktemp("diffusers_accel"))],
        as_accelerate=True,
    )
    assert "/accel/" in ours["accelerate_file"]
    reference = eco.run(
        [sys.executable, SCRIPT, str(tmp_path_factory.mktemp("diffusers_reference"))],
        as_accelerate=False,
    )
    assert "/accel/" not in reference["accelerate_file"]
    return {"accel": ours["cases"], "reference": reference["cases"]}


@pytest.mark.slow
@pytest.mark.parametrize("case", ["auto_budget_smaller_than_the_model", "explicit_map_with_disk"])
def test_the_same_placement_and_outputs_as_the_reference(runs: dict[str, Any], case: str) -> None:
    ours, reference = runs["accel"][case], runs["reference"][case]
    assert "error" not in ours, ours["error"]
    assert ours["max_abs_diff"] == 0.0
    assert "disk" in ours["devices"]
    assert ours["devices"] == reference["devices"]

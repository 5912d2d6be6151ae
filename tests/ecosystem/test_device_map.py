"""transformers' ``from_pretrained(device_map=...)`` on accel with CPU and disk: forward logits
and greedy ``generate`` equal the in-memory model's.

The script runs once (module fixture) in a fresh interpreter under ``ACCEL_AS_ACCELERATE=1``;
each test reads its case.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

SCRIPT = str(Path(__file__).parent / "scripts" / "device_map_run.py")


@pytest.fixture(scope="module")
def cases(eco: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    eco.require("transformers")
    result = eco.run(
        [sys.executable, SCRIPT, str(tmp_path_factory.mktemp("device_map"))], as_accelerate=True
    )
    assert "/accel/" in result["accelerate_file"]
    return result["cases"]


def _equal_to_the_in_memory_model(case: dict[str, Any]) -> None:
    assert "error" not in case, case["error"]
    assert case["devices"] == ["cpu", "disk"], case
    assert case["max_abs_diff"] == 0.0
    assert case["generate_equal"]


@pytest.mark.slow
def test_explicit_map_with_disk(cases: dict[str, Any]) -> None:
    _equal_to_the_in_memory_model(cases["explicit_map_with_disk"])


@pytest.mark.slow
def test_auto_map_with_an_integer_budget_and_disk(cases: dict[str, Any]) -> None:
    _equal_to_the_in_memory_model(cases["int_max_memory_cpu_and_disk"])


@pytest.mark.slow
def test_auto_map_with_a_string_budget(cases: dict[str, Any]) -> None:
    _equal_to_the_in_memory_model(cases["string_max_memory_cpu_and_disk"])


@pytest.mark.slow
def test_auto_map_spills_to_disk_when_the_cpu_budget_is_too_small(cases: dict[str, Any]) -> None:
    _equal_to_the_in_memory_model(cases["cpu_budget_too_small_no_disk_listed"])

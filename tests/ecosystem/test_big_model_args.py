"""transformers' and PEFT's big-model calls with the arguments they pass themselves, accel
against the reference: ``from_pretrained(device_map=<strategy>)`` without ``max_memory``
(transformers passes 90% of the measured memory back as a float), transformers' replacement of
``accelerate.big_modeling.check_device_map`` for ``_no_placement_params`` models, PEFT's
re-dispatch with a float budget, and a bitsandbytes 4-bit load with ``device_map="auto"``.

The script runs once per library (module fixture) in fresh interpreters; each test compares
one case: the same device map, devices and logits.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

SCRIPT = str(Path(__file__).parent / "scripts" / "big_model_args_run.py")


@pytest.fixture(scope="module")
def runs(
    eco: SimpleNamespace, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, Any]]:
    eco.require("transformers", "accelerate")
    results = {}
    for side, switch in (("accel", True), ("reference", False)):
        folder = str(tmp_path_factory.mktemp(f"big_model_args_{side}"))
        results[side] = eco.run([sys.executable, SCRIPT, folder], as_accelerate=switch, timeout=400)
    assert "/accel/" in results["accel"]["accelerate_file"]
    assert "/accel/" not in results["reference"]["accelerate_file"]
    return {side: result["cases"] for side, result in results.items()}


def _same_as_the_reference(runs: dict[str, dict[str, Any]], case: str) -> None:
    if case not in runs["reference"]:
        pytest.skip(f"{case}: its library is not installed")
    ours, theirs = runs["accel"][case], runs["reference"][case]
    assert "error" not in theirs, theirs["error"]
    assert "error" not in ours, ours["error"]
    assert ours == theirs


@pytest.mark.slow
@pytest.mark.parametrize("strategy", ["auto", "balanced", "balanced_low_0", "sequential"])
def test_from_pretrained_with_a_strategy_and_no_max_memory(runs, strategy):
    _same_as_the_reference(runs, f"from_pretrained_{strategy}")


@pytest.mark.slow
def test_the_replaced_check_device_map_is_obeyed(runs):
    _same_as_the_reference(runs, "no_placement_params")
    assert runs["accel"]["no_placement_params"]["device_map"] == {"model": "cpu"}


@pytest.mark.slow
def test_peft_dispatches_again_with_a_float_budget(runs):
    _same_as_the_reference(runs, "peft_redispatch")
    assert runs["accel"]["peft_redispatch"]["device_map"] == {"base_model": "cpu"}


@pytest.mark.slow
def test_bitsandbytes_4bit_with_device_map_auto(runs):
    # bitsandbytes loads on the CPU here; its CPU 4-bit forward may fail the same way on both
    # sides (a kernel it lacks), which the comparison then covers too.
    _same_as_the_reference(runs, "bnb_4bit_auto")

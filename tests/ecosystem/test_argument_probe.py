"""The differential argument probe: every name that transformers, PEFT, TRL and diffusers use
from ``accelerate`` (the scan of ``probe/scan.py``, attribute chains included) is called with the
kinds of arguments the clients' call sites pass (``probe/cases*.py``), once on accel (switch on)
and once on the reference (switch off), each side in one fresh interpreter, and the results are
compared.

Equivalence (``differs``):

- both return: the values are equal as structures; numbers compare by value whatever their type
  (``0 == 0.0 == numpy.int64(0)``), dicts as mappings (order left out), tensors by dtype, shape,
  device and values;
- both raise: accel's error is the reference's class or a subclass of it, or a ``ValueError`` /
  ``TypeError`` (accel's clear refusal of an input the reference cannot use either);
- the reference raises and accel returns: only for the cases of ``ACCEL_ACCEPTS_MORE``;
- ``DELIBERATE`` cases differ by a documented rule: both must return.

A name of the scan without a case fails ``test_every_name_of_the_scan_has_a_case_or_a_reason``
until a case (or a reason it cannot run on the CPU) is added. The reference is needed (``uv sync --group bench``).
"""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

PROBE = Path(__file__).parent / "probe"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, PROBE / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _load_cases() -> ModuleType:
    saved = {name: sys.modules.get(name) for name in ("cases", "cases_bigmodel", "cases_training")}
    try:
        cases = _load("cases")
        _load("cases_bigmodel")
        _load("cases_training")
        return cases
    finally:
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module


cases = _load_cases()
scan = _load("scan")


def case_ids() -> list[str]:
    ids = []
    for (module, name), group in cases.CASES.items():
        key = module if name is None else f"{module}:{name}"
        ids.extend(f"{key}::{case_name}" for case_name in group)
    return ids


def normal(value: Any) -> Any:
    """The form two results are compared in (see the module docstring)."""
    if isinstance(value, list):
        return [normal(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1 and ("int" in value or "float" in value):
        return ("number", next(iter(value.values())))
    if set(value) == {"numpy", "value"}:
        return ("number", value["value"])
    if set(value) == {"dict"}:
        pairs = [(json.dumps(normal(k), sort_keys=True), normal(v)) for k, v in value["dict"]]
        return ("dict", sorted(pairs, key=lambda pair: pair[0]))
    return {key: normal(v) for key, v in value.items()}


def _raised(value: Any) -> bool:
    return isinstance(value, dict) and "raised" in value


def differs(case_id: str, reference: Any, ours: Any) -> str | None:
    """Why accel's result is not equivalent to the reference's, or None."""
    if _raised(reference) and _raised(ours):
        if reference["raised"] in ours["mro"] or {"ValueError", "TypeError"} & set(ours["mro"]):
            return None
        return f"accel raises {ours['raised']}, not a kind of {reference['raised']}"
    if _raised(reference):
        if case_id in cases.ACCEL_ACCEPTS_MORE:
            return None
        return f"the reference raises {reference['raised']}: {reference['message']}; accel returns"
    if _raised(ours):
        return f"accel raises {ours['raised']}: {ours['message']}"
    if case_id in cases.DELIBERATE or normal(reference) == normal(ours):
        return None
    return "the results differ"


@pytest.fixture(scope="module")
def outcomes(eco: Any) -> dict[str, dict[str, Any]]:
    """Every case's result on each side: the two interpreters run at once."""
    eco.require("accelerate")
    runs = {
        side: subprocess.Popen(
            [sys.executable, str(PROBE / "runner.py")],
            env=eco.environment(as_accelerate=side == "accel"),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for side in ("accel", "reference")
    }
    results = {}
    for side, process in runs.items():
        out, err = process.communicate(timeout=240)
        assert process.returncode == 0, (out + err)[-6000:]
        lines = [line for line in out.splitlines() if line.startswith("RESULT ")]
        assert len(lines) == 1, (out + err)[-6000:]
        results[side] = json.loads(lines[0][len("RESULT ") :])
    return results


def test_every_name_of_the_scan_has_a_case_or_a_reason() -> None:
    if not scan.installed_clients():
        pytest.skip("no client is installed (uv sync --group ecosystem)")
    uses = scan.all_uses()
    missing = sorted(
        (key for key in uses if key not in cases.CASES and key not in cases.NOT_ON_CPU), key=str
    )
    assert not missing, "names the clients use with no case in tests/ecosystem/probe:\n" + (
        "\n".join(f"{m}:{n} (used by {', '.join(sorted(uses[(m, n)])[:3])})" for m, n in missing)
    )
    assert not set(cases.CASES) & set(cases.NOT_ON_CPU)


@pytest.mark.parametrize("case_id", case_ids())
def test_the_case_gives_the_same_result_on_accel_and_the_reference(
    case_id: str, outcomes: dict[str, dict[str, Any]]
) -> None:
    reference, ours = outcomes["reference"][case_id], outcomes["accel"][case_id]
    why = differs(case_id, reference, ours)
    assert why is None, f"{case_id}: {why}\nreference: {reference}\naccel: {ours}"


def test_the_equivalence_rules() -> None:
    error = {"raised": "KeyError", "mro": ["KeyError", "LookupError"], "message": "x"}
    clear = {"raised": "DeviceMapError", "mro": ["DeviceMapError", "ValueError"], "message": "y"}
    other = {"raised": "RuntimeError", "mro": ["RuntimeError", "Exception"], "message": "z"}
    assert differs("c", error, clear) is None
    assert differs("c", clear | {"raised": "ValueError"}, clear) is None
    assert differs("c", clear, other) == "accel raises RuntimeError, not a kind of DeviceMapError"
    assert differs("c", {"int": 0}, {"float": 0.0}) is None
    assert differs("c", {"float": 1.5}, {"int": 1}) == "the results differ"
    assert differs("c", {"dict": [["a", 1], ["b", 2]]}, {"dict": [["b", 2], ["a", 1]]}) is None
    assert "accel returns" in str(differs("c", error, {"int": 1}))
    assert "accel raises" in str(differs("c", {"int": 1}, clear))
    assert set(cases.DELIBERATE) | set(cases.ACCEL_ACCEPTS_MORE) <= set(case_ids())

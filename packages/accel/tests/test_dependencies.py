"""Pin what the accel meta-package (distribution `accel-torch`) requires: every accel package by minor range, and DeepSpeed
only as an extra."""

from __future__ import annotations

import re
from importlib.metadata import requires

SIBLINGS = {
    "accel-state",
    "accel-collectives",
    "accel-data",
    "accel-bigmodel",
    "accel-pipeline",
    "accel-precision",
    "accel-trackers",
    "accel-launch",
}


def _names(requirements: list[str], extra: str | None = None) -> set[str]:
    if extra is None:
        chosen = [r for r in requirements if "extra ==" not in r]
    else:
        chosen = [r for r in requirements if re.search(rf"extra == ['\"]{extra}['\"]", r)]
    return {re.split(r"[ <>=!~;\[]", r, maxsplit=1)[0].lower() for r in chosen}


def test_required_dependencies() -> None:
    assert _names(requires("accel-torch") or []) == SIBLINGS | {
        "numpy",
        "psutil",
        "safetensors",
        "torch",
        "zlib-ng",
    }


def test_siblings_are_pinned_to_a_minor_range() -> None:
    for sibling in SIBLINGS:
        spec = next(r for r in requires("accel-torch") or [] if _names([r]) == {sibling})
        assert ">=0.1" in spec and "<0.2" in spec, spec


def test_deepspeed_is_an_extra() -> None:
    assert _names(requires("accel-torch") or [], extra="deepspeed") == {"deepspeed"}

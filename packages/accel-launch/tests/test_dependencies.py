"""Pin what accel-launch requires."""

from __future__ import annotations

import re
from importlib.metadata import requires


def _names(requirements: list[str]) -> set[str]:
    required = [r for r in requirements if "extra ==" not in r]
    return {re.split(r"[ <>=!~;\[]", r, maxsplit=1)[0].lower() for r in required}


def test_required_dependencies() -> None:
    assert _names(requires("accel-launch") or []) == {
        "accel-state",
        "accel-collectives",
        "accel-bigmodel",
        "pyyaml",
        "safetensors",
        "torch",
    }


def test_siblings_are_pinned_to_a_minor_range() -> None:
    for sibling in ("accel-state", "accel-collectives", "accel-bigmodel"):
        spec = next(r for r in requires("accel-launch") or [] if r.startswith(sibling))
        assert ">=0.1" in spec and "<0.2" in spec, spec

"""Pin the declared requirements of accel-collectives."""

from __future__ import annotations

import re
from importlib.metadata import requires


def _names(requirements: list[str]) -> set[str]:
    required = [r for r in requirements if "extra ==" not in r]
    return {re.split(r"[ <>=!~;\[]", r, maxsplit=1)[0].lower() for r in required}


def test_required_dependencies() -> None:
    assert _names(requires("accel-collectives") or []) == {"accel-state", "torch"}


def test_accel_state_is_pinned_to_a_minor_range() -> None:
    spec = next(r for r in requires("accel-collectives") or [] if r.startswith("accel-state"))
    assert ">=0.1" in spec and "<0.2" in spec, spec

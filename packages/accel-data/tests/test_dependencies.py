"""accel-data's required dependencies, pinned."""

from __future__ import annotations

import re
from importlib.metadata import requires


def test_required_dependencies() -> None:
    required = sorted(
        re.split(r"[<>=!~ ;\[]", req, maxsplit=1)[0]
        for req in requires("accel-data") or []
        if "extra ==" not in req
    )
    assert required == ["accel-collectives", "accel-state", "torch"]

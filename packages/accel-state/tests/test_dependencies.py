"""Pin what accel-state requires: torch and numpy, nothing of ours; DeepSpeed only as an extra."""

from __future__ import annotations

import re
import subprocess
import sys
from importlib.metadata import requires


def _names(requirements: list[str], extra: str | None = None) -> set[str]:
    if extra is None:
        chosen = [r for r in requirements if "extra ==" not in r]
    else:
        chosen = [r for r in requirements if re.search(rf"extra == ['\"]{extra}['\"]", r)]
    return {re.split(r"[ <>=!~;\[]", r, maxsplit=1)[0].lower() for r in chosen}


def test_required_dependencies() -> None:
    assert _names(requires("accel-state") or []) == {"numpy", "torch"}


def test_deepspeed_is_an_extra() -> None:
    assert _names(requires("accel-state") or [], extra="deepspeed") == {"deepspeed"}


def test_importing_accel_state_imports_no_other_accel_package_nor_deepspeed() -> None:
    code = (
        "import sys, accel_state\n"
        "ours = sorted(m for m in sys.modules if m.split('.')[0].startswith('accel')"
        " and m.split('.')[0] != 'accel_state')\n"
        "print(repr((ours, 'deepspeed' in sys.modules)))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "([], False)"

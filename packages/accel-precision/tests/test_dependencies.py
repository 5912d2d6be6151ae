"""Pin what accel-precision requires; its quantization and FP8 backends are extras only."""

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
    assert _names(requires("accel-precision") or []) == {"accel-state", "accel-bigmodel", "torch"}


def test_siblings_are_pinned_to_a_minor_range() -> None:
    for sibling in ("accel-state", "accel-bigmodel"):
        spec = next(r for r in requires("accel-precision") or [] if r.startswith(sibling))
        assert ">=0.1" in spec and "<0.2" in spec, spec


def test_backends_are_extras() -> None:
    assert _names(requires("accel-precision") or [], extra="bnb") == {"bitsandbytes"}
    assert _names(requires("accel-precision") or [], extra="torchao") == {"torchao"}


def test_importing_accel_precision_imports_no_backend() -> None:
    code = (
        "import sys, accel_precision\n"
        "print(sorted(m for m in ('bitsandbytes', 'torchao', 'transformer_engine', 'msamp')"
        " if m in sys.modules))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

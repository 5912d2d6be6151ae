"""Which of accel's dependencies, and of the checks' optional ones, import on this machine.

Prints a table and writes it as JSON (``--json PATH``) for the results page. Exits with 1 when
a dependency that accel needs at run time is missing (the check cannot go on without it).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.metadata
import json
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

IMPORT_NAMES = {"pyyaml": "yaml", "zlib-ng": "zlib_ng", "transformer-engine": "transformer_engine"}
"""Distribution -> import name, where they differ."""
FALLBACKS = {"zlib-ng": "accel computes CRC-32 with the standard zlib instead (slower)"}
"""Declared dependencies accel runs without."""
OPTIONAL = {
    "accelerate": "the reference side of the benchmarks",
    "transformers": "the device_map='auto' and bitsandbytes checks",
    "torchao": "the FP8 check",
    "bitsandbytes": "the int8 / nf4 checks",
    "transformer-engine": "the Transformer Engine test",
    "pytest-timeout": "per-test timeouts",
}


def _declared() -> list[str]:
    import tomllib

    names: set[str] = set()
    for pyproject in ROOT.glob("packages/*/pyproject.toml"):
        with open(pyproject, "rb") as handle:
            for requirement in tomllib.load(handle)["project"].get("dependencies", []):
                name = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0].strip()
                if not name.startswith("accel"):
                    names.add(name.lower())
    return sorted(names)


def probe(name: str) -> dict[str, str | None]:
    """The installed version of ``name`` and whether it imports (the error when it does not)."""
    try:
        version = importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        version = None
    module = IMPORT_NAMES.get(name, name.replace("-", "_"))
    try:
        importlib.import_module(module)
        error = None
    except Exception as exc:  # an import can fail with anything (a CUDA library, an ABI)
        error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:160] if str(exc) else ''}"
    return {"name": name, "version": version, "error": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--json", type=Path, help="write the table here too")
    args = parser.parse_args()
    rows = []
    for name in _declared():
        row = probe(name)
        row["role"] = "required" if name not in FALLBACKS else f"required ({FALLBACKS[name]})"
        rows.append(row)
    for name, role in OPTIONAL.items():
        row = probe(name)
        row["role"] = f"optional: {role}"
        rows.append(row)
    missing = []
    for row in rows:
        state = "ok" if row["error"] is None else f"MISSING ({row['error']})"
        print(f"deps: {row['name']:<20} {row['version'] or '-':<14} {state}  [{row['role']}]")
        if row["error"] is not None and row["role"] == "required":
            missing.append(row["name"])
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    if missing:
        print(
            f"deps: accel cannot run without {', '.join(missing)}. Put their wheels in "
            "build/gpu-wheels (tools/gpu_check.sh --prepare) and carry that folder.",
            file=sys.stderr,
        )
        raise SystemExit(1)


if __name__ == "__main__":
    main()

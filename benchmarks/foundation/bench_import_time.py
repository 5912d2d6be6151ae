"""Import cost of ``accel`` and ``accel.utils`` measured with ``python -X importtime``.

Each measurement is a fresh interpreter; the script reports the median over several runs of
the cumulative time Python itself attributes to the named module (so interpreter start-up is
excluded) and whether torch was imported as a side effect. The same table measures the
reference library's module paths (when it is installed) and a floor: a small standard-library
package.

Run: ``uv run --no-sync python benchmarks/foundation/bench_import_time.py [--runs 7]``
(``--out PAGE`` also writes the table into its own section of that page,
``benchmarks/results/import_time.md``, keeping the rest).

To compare with another version of the ``accel`` sources under the same machine load, pass
``--baseline-src DIR`` (a directory holding the ``accel`` packages, e.g. the ``src`` folders of
``git archive <commit> packages`` linked into one directory): runs alternate between the two.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
from pathlib import Path

STATEMENTS = {
    "import accel": "accel",
    "import accel.utils": "accel.utils",
    "import accel.utils.modeling": "accel.utils.modeling",
    "import accel.state": "accel.state",
    "import accel_state": "accel_state",
    "import accel_launch": "accel_launch",
}
"""accel's statements: the module named is the one whose cumulative time is reported."""

REFERENCE = ("accelerate", "accelerate.utils", "accelerate.utils.modeling", "accelerate.state")
"""The reference library's same module paths, measured in the same run when it is installed."""

FLOOR = "json"
"""A small standard-library package: what importing a package that does nothing at import costs."""


def cumulative_us(statement: str, module: str, src: str | None = None) -> tuple[int, bool]:
    """Run ``statement`` in a fresh interpreter; return (cumulative us of ``module``, torch?).

    ``src``, when given, is put first on ``PYTHONPATH`` so that its ``accel`` is imported.
    """
    env = dict(os.environ)
    if src is not None:
        env["PYTHONPATH"] = os.pathsep.join([src, env.get("PYTHONPATH", "")])
    proc = subprocess.run(
        [
            sys.executable,
            "-X",
            "importtime",
            "-c",
            f"{statement}; import sys; print('torch' in sys.modules)",
        ],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    cumulative = None
    for line in proc.stderr.splitlines():
        if not line.startswith("import time:"):
            continue
        fields = [part.strip() for part in line[len("import time:") :].split("|")]
        if fields[2].strip() == module:
            cumulative = int(fields[1])
    if cumulative is None:
        raise RuntimeError(f"{module!r} is not in the importtime output of {statement!r}")
    return cumulative, proc.stdout.strip() == "True"


def _median_ms(samples: list[tuple[int, bool]]) -> str:
    return f"{statistics.median(us for us, _ in samples) / 1000:.1f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--baseline-src", default=None)
    parser.add_argument("--out", default=None, help="page to write the table into")
    args = parser.parse_args()
    baseline = args.baseline_src
    header = "| statement | median cumulative (ms) | torch imported |"
    if baseline:
        header = "| statement | baseline (ms) | this tree (ms) | torch imported |"
    table = [header, "| --- | ---: |" + (" ---: |" if baseline else "") + " --- |"]
    print("\n".join(table))
    rows = [(f"`{statement}`", statement, module) for statement, module in STATEMENTS.items()]
    if not baseline:
        floor = f"import {FLOOR}"
        rows.append((f"floor: `{floor}` (a small standard-library package)", floor, FLOOR))
        if importlib.util.find_spec("accelerate") is not None:
            rows += [(f"import {m} (reference)", f"import {m}", m) for m in REFERENCE]
    for label, statement, module in rows:
        ours: list[tuple[int, bool]] = []
        base: list[tuple[int, bool]] = []
        for _ in range(args.runs):
            if baseline:
                try:
                    base.append(cumulative_us(statement, module, baseline))
                except (subprocess.CalledProcessError, RuntimeError):
                    pass
            ours.append(cumulative_us(statement, module))
        torch_loaded = "yes" if any(loaded for _, loaded in ours) else "no"
        cells = [label]
        if baseline:
            cells.append(_median_ms(base) if base else "module missing")
        cells += [_median_ms(ours), torch_loaded]
        table.append("| " + " | ".join(cells) + " |")
        print(table[-1])
    if args.out is not None:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _machine import write_section  # benchmarks/_machine.py

        heading = f"## Latest run of `bench_import_time.py` (median of {args.runs} fresh runs)"
        body = "\n".join([heading, "", *table])
        write_section(args.out, "bench_import_time", "Import time of `accel`", body)


if __name__ == "__main__":
    main()

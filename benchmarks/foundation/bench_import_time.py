"""Import cost of ``accel`` and ``accel.utils`` measured with ``python -X importtime``.

Each measurement is a fresh interpreter; the script reports the median over several runs of
the cumulative time Python itself attributes to the named module (so interpreter start-up is
excluded) and whether torch was imported as a side effect.

Run: ``uv run --no-sync python benchmarks/foundation/bench_import_time.py [--runs 7]``
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys

STATEMENTS = {
    "import accel": "accel",
    "import accel.utils": "accel.utils",
    "import accel.utils.modeling": "accel.utils.modeling",
    "import accel.state": "accel.state",
}


def cumulative_us(statement: str, module: str) -> tuple[int, bool]:
    """Run ``statement`` in a fresh interpreter; return (cumulative us of ``module``, torch?)."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    print("| statement | median cumulative (ms) | torch imported |")
    print("| --- | ---: | --- |")
    for statement, module in STATEMENTS.items():
        try:
            samples = [cumulative_us(statement, module) for _ in range(args.runs)]
        except subprocess.CalledProcessError:
            print(f"| `{statement}` | module missing | - |")
            continue
        median_ms = statistics.median(us for us, _ in samples) / 1000
        torch_loaded = any(loaded for _, loaded in samples)
        print(f"| `{statement}` | {median_ms:.1f} | {'yes' if torch_loaded else 'no'} |")


if __name__ == "__main__":
    main()

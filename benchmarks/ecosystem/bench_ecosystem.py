"""accel under transformers: the cost of the ``ACCEL_AS_ACCELERATE`` switch when it is off,
transformers' ``Trainer`` steps per second on accel and on the reference (1 and 2 processes), and
``from_pretrained(device_map="auto")`` with disk offload, side by side in one run.

Run: ``uv run --no-sync python benchmarks/ecosystem/bench_ecosystem.py [--runs 2] [--steps 40]
[--repeats 2] [--hidden 384 --layers 6 --load-repeats 3] [--out PAGE]``

1. The ``.pth`` line that accel-torch installs runs at every interpreter start; with the variable
   unset it is one ``os.environ`` lookup. Measured: that line alone, in-process (mean of 200,000
   executions), and interpreter start (``python -c pass``) and ``import accel`` (``python -X
   importtime``), median of fresh processes, with the variable unset and set to ``0``.
2. ``Trainer`` on a tiny Llama built from a config (no hub), with ``import accelerate``
   answered by accel (``ACCEL_AS_ACCELERATE=1``) and by the reference: 1 process, and 2
   processes under torchrun for both (the same launcher; ``accel launch --as_accelerate`` as
   one more row). Per-phase step times explain the gap (``_eco_trainer.py``).
3. ``from_pretrained(device_map="auto", max_memory=...)`` of a saved Llama with half its
   weights offloaded to disk, accel against the reference, the in-memory load as the floor
   (``_eco_load.py``).
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

import _eco_load  # benchmarks/ecosystem/, beside this file
import _eco_trainer


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ACCEL_")}
    env.update(PYTHONWARNINGS="ignore", OMP_NUM_THREADS="1", HF_HUB_OFFLINE="1", **extra)
    return env


def pth_line_ns() -> float:
    """Nanoseconds of one execution of the installed ``.pth`` line with the variable unset."""
    path = Path(sysconfig.get_paths()["purelib"]) / "accel_as_accelerate.pth"
    line = path.read_text(encoding="utf-8").strip()
    code = compile(line, str(path), "exec")
    saved = os.environ.pop("ACCEL_AS_ACCELERATE", None)
    try:
        n = 200_000
        start = time.perf_counter_ns()
        for _ in range(n):
            exec(code, {})
        return (time.perf_counter_ns() - start) / n
    finally:
        if saved is not None:
            os.environ["ACCEL_AS_ACCELERATE"] = saved


def start_ms(runs: int, env: dict[str, str]) -> float:
    """Median wall time of ``python -c pass``."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=env, check=True)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def import_accel_ms(runs: int, env: dict[str, str]) -> float:
    """Median cumulative ``-X importtime`` of ``import accel``."""
    times = []
    for _ in range(runs):
        done = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", "import accel"],
            env=env,
            capture_output=True,
            text=True,
            check=True,
        )
        found = re.findall(r"\|\s*(\d+) \| accel$", done.stderr, re.M)
        times.append(int(found[-1]) / 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=2, help="fresh interpreters per row")
    parser.add_argument("--steps", type=int, default=40, help="optimizer steps per train()")
    parser.add_argument("--repeats", type=int, default=2, help="train() calls per interpreter")
    parser.add_argument("--one-process-only", action="store_true", help="skip the 2-process rows")
    parser.add_argument("--hidden", type=int, default=384, help="hidden size of the loaded Llama")
    parser.add_argument("--layers", type=int, default=6, help="layers of the loaded Llama")
    parser.add_argument("--load-repeats", type=int, default=3, help="loads per interpreter")
    parser.add_argument("--out", default=None, help="page to write")
    args = parser.parse_args()

    off, zero = _env(), _env(ACCEL_AS_ACCELERATE="0")
    rows = [
        ("the `.pth` line alone (ns, in-process)", f"{pth_line_ns():.0f}", "-"),
        (
            "`python -c pass` (ms)",
            f"{start_ms(args.runs, off):.1f}",
            f"{start_ms(args.runs, zero):.1f}",
        ),
        (
            "`import accel` (ms, -X importtime)",
            f"{import_accel_ms(args.runs, off):.1f}",
            f"{import_accel_ms(args.runs, zero):.1f}",
        ),
    ]
    with tempfile.TemporaryDirectory() as work:
        trained = _eco_trainer.run_all(
            work, args.steps, args.repeats, args.runs, not args.one_process_only
        )
        loaded = _eco_load.run_all(work, args.hidden, args.layers, args.load_repeats, args.runs)
    load = os.getloadavg()[0]
    flags = " ".join(sys.argv[1:]).replace(f"--out {args.out}", "").strip()
    page = [
        f"## Latest run of `bench_ecosystem.py {flags}`",
        "",
        f"Load average {load:.1f} at the end (the machine may be shared: compare within a table).",
        "",
        "### The switch, off: what every interpreter start pays",
        "",
        "| measure | variable unset | `ACCEL_AS_ACCELERATE=0` |",
        "| --- | ---: | ---: |",
        *[f"| {a} | {b} | {c} |" for a, b, c in rows],
        "",
        *_eco_trainer.tables(trained, args.steps, args.repeats, args.runs),
        "",
        *_eco_load.table(loaded, args.hidden, args.layers, args.load_repeats, args.runs),
        "",
    ]
    text = "\n".join(page)
    print(text)
    if args.out:
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from _machine import write_section  # benchmarks/_machine.py

        write_section(args.out, "bench_ecosystem", "accel under transformers", text)


if __name__ == "__main__":
    main()

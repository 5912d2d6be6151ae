"""Time a job loses when one of its 2 processes is SIGKILLed, with ``--max_restarts 1``.

    uv run python benchmarks/fault_tolerance/bench_restart.py [--repeat 2] [--out PATH]

Runs ``tests/scripts/restartable_training.py`` (12 steps, a checkpoint every 3) through
``accel launch`` uninterrupted, then with a process killed at a given point; the time lost is
the killed run's wall time minus the median uninterrupted wall time: detection by the launcher,
stopping the survivor, starting and forming a new group, loading the newest checkpoint and
redoing the steps since it. Writes a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "tests" / "scripts" / "restartable_training.py"
CASES = {
    "uninterrupted": {},
    "rank 1 killed at step 7 (1 step after a checkpoint)": {
        "FT_KILL_RANK": "1",
        "FT_KILL_STEP": "7",
    },
    "rank 1 killed inside the save of step 6": {
        "FT_KILL_RANK": "1",
        "FT_KILL_STEP": "6",
        "FT_KILL_DURING": "save",
    },
    "rank 0 killed at step 4": {"FT_KILL_RANK": "0", "FT_KILL_STEP": "4"},
}


def _run(env: dict[str, str]) -> float:
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    with tempfile.TemporaryDirectory() as project:
        command = [launcher, "--cpu", "--num_processes", "2", "--max_restarts", "1"]
        start = time.perf_counter()
        subprocess.run(
            [*command, str(SCRIPT), project],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
            timeout=600,
        )
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/fault_tolerance.md"))
    args = parser.parse_args()
    walls: dict[str, list[float]] = {name: [] for name in CASES}
    for _ in range(args.repeat):
        for name, env in CASES.items():
            walls[name].append(_run(env))
    base = statistics.median(walls["uninterrupted"])
    rows = [
        f"| {name} | {statistics.median(w):.1f} | "
        + ("-" if name == "uninterrupted" else f"{statistics.median(w) - base:.1f}")
        + " |"
        for name, w in walls.items()
    ]
    text = (
        "# Fault tolerance: time lost per failure\n\n"
        f"`accel launch --cpu --num_processes 2 --max_restarts 1` of "
        f"`tests/scripts/restartable_training.py` (12 steps, checkpoint every 3), "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs; median of "
        f"{args.repeat} runs per case, cases interleaved.\n\n"
        "| case | wall time (s) | time lost (s) |\n| --- | ---: | ---: |\n" + "\n".join(rows) + "\n"
    )
    Path(args.out).write_text(text)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(args.out)  # one PNG per table, shown under it
    print(text)


if __name__ == "__main__":
    main()

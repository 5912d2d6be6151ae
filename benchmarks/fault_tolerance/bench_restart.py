"""Time a job loses when one of its 2 processes is SIGKILLed, with ``--max_restarts 1``.

    uv run python benchmarks/fault_tolerance/bench_restart.py [--repeat 2] [--out PATH]

Runs ``tests/scripts/restartable_training.py`` (12 steps, a checkpoint every 3) through
``accel launch`` uninterrupted, then with a process killed at a given point; the time lost is
the killed run's wall time minus the median uninterrupted wall time: detection by the launcher,
stopping the survivor, starting and forming a new group, loading the newest checkpoint and
redoing the steps since it. Writes a Markdown table.

The same cases run, interleaved with accel's, through the reference library's launcher
(``accelerate launch --multi_gpu``: its ``--cpu`` starts one process) and through the floor,
torch's own elastic agent (``torchrun``, no accel launcher), each with ``--max_restarts 1``
and a 0.1 s monitor interval; the training script is the same in all three. A second table puts
them side by side (``--side-cases`` limits how many cases they run, in the order above).
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


def _tool(name: str) -> str:
    return shutil.which(name) or str(Path(sys.executable).parent / name)


LAUNCHERS = {
    "accel-launch": lambda: [_tool("accel-launch"), "--cpu", "--num_processes", "2"],
    "accelerate launch": lambda: [
        _tool("accelerate"),
        "launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--monitor_interval",
        "0.1",
    ],
    "floor: torchrun": lambda: [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node",
        "2",
        "--monitor_interval",
        "0.1",
    ],
}
"""Label -> command that starts 2 processes (``--max_restarts 1`` is added)."""


def _run(env: dict[str, str], launcher: str = "accel-launch") -> float:
    with tempfile.TemporaryDirectory() as project:
        command = [*LAUNCHERS[launcher](), "--max_restarts", "1"]
        start = time.perf_counter()
        subprocess.run(
            [*command, str(SCRIPT), project],
            env={**os.environ, **env},
            check=True,
            capture_output=True,
            timeout=600,
        )
        return time.perf_counter() - start


def _side_table(medians: dict[tuple[str, str], float], cases: list[str]) -> str:
    """accel's launcher, the reference's and torchrun, case by case (× floor: of torchrun)."""
    lines = [
        "",
        "## Side by side: accel, the reference and the floor",
        "",
        "The same cases, interleaved with the runs above: the reference's launcher "
        "(`accelerate launch --multi_gpu --num_processes 2 --max_restarts 1`; its `--cpu` starts "
        "one process) and the floor, torch's elastic agent alone (`torchrun --nproc_per_node 2 "
        "--max_restarts 1`), both with a 0.1 s monitor interval, running the same script.",
        "",
        "| launcher · case | wall time (s) | time lost (s) | wall × floor |",
        "| --- | ---: | ---: | ---: |",
    ]
    for launcher in LAUNCHERS:
        base = medians[launcher, "uninterrupted"]
        for case in cases:
            wall = medians[launcher, case]
            lost = "-" if case == "uninterrupted" else f"{wall - base:.1f}"
            floor = medians["floor: torchrun", case]
            lines.append(f"| {launcher} · {case} | {wall:.1f} | {lost} | {wall / floor:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/fault_tolerance.md"))
    parser.add_argument(
        "--side-cases",
        type=int,
        default=len(CASES),
        help="cases the reference's launcher and the floor run (the first ones)",
    )
    args = parser.parse_args()
    side_cases = list(CASES)[: max(1, args.side_cases)]
    walls: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeat):
        for name, env in CASES.items():
            for launcher in LAUNCHERS:
                if launcher == "accel-launch" or name in side_cases:
                    walls.setdefault((launcher, name), []).append(_run(env, launcher))
    medians = {key: statistics.median(w) for key, w in walls.items()}
    base = medians["accel-launch", "uninterrupted"]
    rows = [
        f"| {name} | {medians['accel-launch', name]:.1f} | "
        + ("-" if name == "uninterrupted" else f"{medians['accel-launch', name] - base:.1f}")
        + " |"
        for name in CASES
    ]
    text = (
        "# Fault tolerance: time lost per failure\n\n"
        f"`accel launch --cpu --num_processes 2 --max_restarts 1` of "
        f"`tests/scripts/restartable_training.py` (12 steps, checkpoint every 3), "
        f"{platform.machine()}, {os.cpu_count()} cores shared with other jobs; median of "
        f"{args.repeat} runs per case, cases interleaved.\n\n"
        "| case | wall time (s) | time lost (s) |\n| --- | ---: | ---: |\n"
        + "\n".join(rows)
        + "\n"
        + _side_table(medians, side_cases)
    )
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py
    from _machine import generated_blocks, restore_kept  # benchmarks/_machine.py

    others = generated_blocks(args.out)  # the chaos soak's section of the same page
    Path(args.out).write_text(text)
    restore_kept(args.out, others)

    write_charts(args.out)  # one PNG per table, shown under it
    print(text)


if __name__ == "__main__":
    main()

"""Import time and 2-process launch time of accel, side by side with the reference library
(``accelerate``, when it is installed) and the floors: a bare interpreter, ``import torch``, and
torchrun starting a trivial gloo script (what accel's import and launcher add to).

Run: uv run --all-packages --group bench python benchmarks/foundation/bench_startup.py
Each figure is the median of N fresh runs on this machine; ratios come from the same run.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TRIVIAL = """
import torch.distributed as dist
import os
if int(os.environ.get("WORLD_SIZE", "1")) > 1:
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    dist.barrier()
    dist.destroy_process_group()
"""

TRIVIAL_ACCEL = """
from accel import PartialState
PartialState().wait_for_everyone()
"""

TRIVIAL_ACCELERATE = """
from accelerate import PartialState
s = PartialState(cpu=True)
s.wait_for_everyone()
print("processes", s.num_processes)
"""


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _time(command: list[str], runs: int, env: dict[str, str] | None = None) -> tuple[float, str]:
    samples = []
    out = ""
    for _ in range(runs):
        start = time.perf_counter()
        proc = subprocess.run(
            command, capture_output=True, text=True, env={**os.environ, **(env or {})}
        )
        samples.append(time.perf_counter() - start)
        if proc.returncode != 0:
            raise SystemExit(f"failed: {' '.join(command)}\n{proc.stderr[-2000:]}")
        out = proc.stdout
    return statistics.median(samples), out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--output", default="benchmarks/results/foundation_startup.md")
    args = parser.parse_args()
    py = sys.executable
    has_ref = importlib.util.find_spec("accelerate") is not None
    rows: list[tuple[str, float, str, str]] = []
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _machine import compile_bytecode  # benchmarks/_machine.py

    compile_bytecode()

    t, _ = _time([py, "-c", "pass"], args.runs)
    rows.append(("floor: bare interpreter, `python -c pass`", t, "", "Python's own start"))
    base, _ = _time([py, "-c", "import torch"], args.runs)
    rows.append(("floor: `import torch`", base, "1.00x", "what the import ratios divide by"))
    t, _ = _time([py, "-c", "import accel"], args.runs)
    rows.append(("import accel", t, f"{t / base:.2f}x", "lazy: loads nothing heavy"))
    t, _ = _time([py, "-c", "from accel import Accelerator"], args.runs)
    rows.append(("from accel import Accelerator", t, f"{t / base:.2f}x", "target <= 1.05x"))
    if has_ref:
        t, _ = _time([py, "-c", "import accelerate"], args.runs)
        rows.append(("import accelerate (reference)", t, f"{t / base:.2f}x", ""))
        t, _ = _time([py, "-c", "from accelerate import Accelerator"], args.runs)
        rows.append(("from accelerate import Accelerator (reference)", t, f"{t / base:.2f}x", ""))

    with tempfile.TemporaryDirectory() as tmp:
        plain = Path(tmp, "plain.py")
        plain.write_text(TRIVIAL)
        ours = Path(tmp, "ours.py")
        ours.write_text(TRIVIAL_ACCEL)
        ref = Path(tmp, "ref.py")
        ref.write_text(TRIVIAL_ACCELERATE)
        env = {"OMP_NUM_THREADS": "1"}
        bindir = Path(py).parent
        torchrun = [
            py,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node=2",
            "--master_addr=127.0.0.1",
            f"--master_port={_free_port()}",
            "--monitor_interval=0.1",
        ]
        launch_base, _ = _time([*torchrun, str(plain)], args.runs, env)
        rows.append(
            (
                "floor: torchrun, 2 processes, trivial gloo script",
                launch_base,
                "1.00x",
                "what the launch ratios divide by",
            )
        )
        accel_launch = [str(bindir / "accel-launch"), "--quiet", "--num_processes", "2"]
        t, _ = _time([*accel_launch, str(plain)], args.runs, env)
        rows.append(("accel-launch, same script", t, f"{t / launch_base:.2f}x", "target <= 1.1x"))
        t, _ = _time([*accel_launch, str(ours)], args.runs, env)
        rows.append(("accel-launch, script using PartialState", t, f"{t / launch_base:.2f}x", ""))
        if has_ref and shutil.which("accelerate", path=str(bindir)):
            ref_launch = [
                str(bindir / "accelerate"),
                "launch",
                "--cpu",
                "--num_processes",
                "2",
                "--num_machines",
                "1",
                "--mixed_precision",
                "no",
                "--dynamo_backend",
                "no",
            ]
            t, out = _time([*ref_launch, str(plain)], args.runs, env)
            rows.append(
                (
                    "accelerate launch --cpu --num_processes 2 (reference)",
                    t,
                    f"{t / launch_base:.2f}x",
                    "",
                )
            )
            t, out = _time([*ref_launch, str(ref)], args.runs, env)
            started = out.count("processes")
            rows.append(
                (
                    "accelerate launch, script using its PartialState (reference)",
                    t,
                    f"{t / launch_base:.2f}x",
                    f"processes started: {started}",
                )
            )

    import torch

    header = [
        "# Startup: import and launch time",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, Python "
        f"{platform.python_version()}, torch {torch.__version__}. Median of {args.runs} fresh "
        "runs each, both libraries byte-compiled first, as installed; × floor = the median over the "
        "floor's median of the same run (`import torch` for imports, torchrun for launches).",
        "",
        "| what | median (s) | × floor | note |",
        "| --- | ---: | ---: | --- |",
    ]
    lines = header + [f"| {a} | {b:.3f} | {c} | {d} |" for a, b, c, d in rows]
    text = "\n".join(lines) + "\n"
    print(text)
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(text)
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(args.output)  # one PNG per table, shown under it


if __name__ == "__main__":
    main()

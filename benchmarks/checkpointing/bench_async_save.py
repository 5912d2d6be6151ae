"""Training stall of ``save_state``: synchronous vs ``async_save=True``, ~1 GB model, 1 process.

Two measurements, each in a fresh subprocess (``OMP_NUM_THREADS=1``):

- stall per save: how long ``save_state`` blocks the training loop (the call's duration), for
  the first save and the later ones (an asynchronous save copies into the host memory of the
  previous one), and for the asynchronous save also how long until it is committed;
- a run of ``STEPS`` training steps saving every ``EVERY`` steps, without saves, with
  synchronous saves and with asynchronous saves (the run ends once the last save is
  committed): total time and steps per second.

Model: 16 x ``Linear(4096, 4096, bias=False)`` in fp32 (1.07 GB), SGD with momentum (one
buffer per parameter: the checkpoint is 2.1 GB). Prints a Markdown table and one JSON object,
with the machine's load average before and after.

Run: uv run --group bench python benchmarks/checkpointing/bench_async_save.py
(``--saves`` per stall measurement, ``--steps`` / ``--every`` for the run, ``--stall-only`` to
skip the runs, ``--layers`` / ``--width`` for the model; or the environment variables
``BENCH_REPEATS``, ``BENCH_STEPS``, ``BENCH_EVERY``, ``BENCH_ONLY=stall``, ``BENCH_LAYERS``,
``BENCH_WIDTH``). ``--out PAGE`` also writes the tables into their own section of that page
(``benchmarks/results/checkpointing_async.md``), keeping the rest.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

LAYERS = int(os.environ.get("BENCH_LAYERS", "16"))
WIDTH = int(os.environ.get("BENCH_WIDTH", "4096"))
SAVES = int(os.environ.get("BENCH_REPEATS", "3"))
STEPS = int(os.environ.get("BENCH_STEPS", "12"))
EVERY = int(os.environ.get("BENCH_EVERY", "4"))


def _build(folder: str):
    import torch
    from accel import Accelerator
    from accel.utils import ProjectConfiguration

    config = ProjectConfiguration(
        project_dir=folder, automatic_checkpoint_naming=True, total_limit=2
    )
    accelerator = Accelerator(cpu=True, project_config=config)
    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, model, optimizer


def _step(accelerator, model, optimizer, batch) -> None:
    loss = model(batch).pow(2).mean()
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()


def worker(kind: str, mode: str, folder: str) -> dict[str, float]:
    import torch

    accelerator, model, optimizer = _build(folder)
    batch = torch.randn(4, WIDTH)
    _step(accelerator, model, optimizer, batch)  # optimizer state exists before any save
    asynchronous = mode == "async"
    if kind == "stall":
        stalls, totals = [], []
        for _ in range(SAVES):
            start = time.perf_counter()
            handle = accelerator.save_state(async_save=asynchronous)
            stalls.append(time.perf_counter() - start)
            if asynchronous:
                handle.wait()
            totals.append(time.perf_counter() - start)
            _step(accelerator, model, optimizer, batch)
        return {
            "stall_s": statistics.median(stalls),
            "stall_first_s": stalls[0],
            "stall_later_s": statistics.median(stalls[1:] or stalls),
            "commit_s": statistics.median(totals),
        }
    start = time.perf_counter()
    for step in range(1, STEPS + 1):
        _step(accelerator, model, optimizer, batch)
        if mode != "none" and step % EVERY == 0:
            accelerator.save_state(async_save=asynchronous)
    accelerator.end_training()  # waits for the last asynchronous save
    total = time.perf_counter() - start
    return {"run_s": total, "steps_per_s": STEPS / total}


def _run(kind: str, mode: str) -> dict[str, float]:
    folder = tempfile.mkdtemp(prefix="accel_bench_async_")
    try:
        done = subprocess.run(
            [sys.executable, __file__, "--worker", kind, mode, folder],
            capture_output=True,
            text=True,
            env={**os.environ, "OMP_NUM_THREADS": "1"},
        )
        if done.returncode != 0:
            raise RuntimeError(f"worker {kind} {mode} exited {done.returncode}:\n{done.stderr}")
        return json.loads(done.stdout.strip().splitlines()[-1])
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--worker", nargs=3)
    parser.add_argument("--layers", type=int, default=LAYERS, help="Linear layers of the model")
    parser.add_argument("--width", type=int, default=WIDTH, help="width of each layer")
    parser.add_argument("--saves", type=int, default=SAVES, help="saves per stall measurement")
    parser.add_argument("--steps", type=int, default=STEPS, help="training steps of each run")
    parser.add_argument("--every", type=int, default=EVERY, help="steps between saves")
    parser.add_argument(
        "--stall-only",
        action="store_true",
        default=os.environ.get("BENCH_ONLY") == "stall",
        help="measure the stall per save only, not the runs",
    )
    parser.add_argument("--out", default=None, help="page to write the tables into")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from _machine import share_sizes, write_section  # benchmarks/_machine.py

    share_sizes(
        globals(),
        BENCH_LAYERS=("LAYERS", args.layers),
        BENCH_WIDTH=("WIDTH", args.width),
        BENCH_REPEATS=("SAVES", args.saves),
        BENCH_STEPS=("STEPS", args.steps),
        BENCH_EVERY=("EVERY", args.every),
    )
    if args.worker:
        print(json.dumps(worker(*args.worker)))
        return
    load_before = os.getloadavg()
    results = {
        "stall_sync": _run("stall", "sync"),
        "stall_async": _run("stall", "async"),
    }
    if not args.stall_only:
        for mode in ("none", "sync", "async"):
            results[f"run_{mode}"] = _run("run", mode)
    load_after = os.getloadavg()
    sync, asyn = results["stall_sync"], results["stall_async"]
    lines = [
        f"Model: {LAYERS} x Linear({WIDTH}, {WIDTH}), {SAVES} saves per stall measurement.",
        "",
        "| save | stall, first save s | stall, later saves s | until committed s |",
        "| --- | --- | --- | --- |",
    ]
    for name, row in (("synchronous", sync), ("async_save=True", asyn)):
        lines.append(
            f"| {name} | {row['stall_first_s']:.2f} | {row['stall_later_s']:.2f} "
            f"| {row['commit_s']:.2f} |"
        )
    first = asyn["stall_first_s"] / sync["stall_first_s"]
    later = asyn["stall_later_s"] / sync["stall_later_s"]
    lines.append(f"\nstall ratio async/sync: first save {first:.1%}, later saves {later:.1%}\n")
    if "run_none" in results:
        lines.append(f"| run of {STEPS} steps, save every {EVERY} | total s | steps/s |")
        lines.append("| --- | --- | --- |")
        for mode in ("none", "sync", "async"):
            row = results[f"run_{mode}"]
            lines.append(f"| {mode} | {row['run_s']:.1f} | {row['steps_per_s']:.2f} |")
    loads = f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}"
    lines.append(f"\n{loads} (1-minute), {os.cpu_count()} cores")
    print("\n".join(lines))
    print(json.dumps({**results, "load_before": load_before, "load_after": load_after}))
    if args.out is not None:
        body = "\n".join(["## Latest run of `bench_async_save.py`", "", *lines])
        write_section(args.out, "bench_async_save", "Checkpointing: async_save", body)


if __name__ == "__main__":
    main()

"""Training stall of ``save_state``: synchronous vs ``async_save=True``, ~1 GB model, 1 process.

Two measurements, each in a fresh subprocess (``OMP_NUM_THREADS=1``):

- stall per save: how long ``save_state`` blocks the training loop (the call's duration), for
  the first save and the later ones (an asynchronous save copies into the host memory of the
  previous one), and for the asynchronous save also how long until it is committed;
- a run of ``STEPS`` training steps saving every ``EVERY`` steps, without saves, with
  synchronous saves and with asynchronous saves (the run ends once the last save is
  committed): total time and steps per second.

Beside accel's rows, the same work with the reference library (its ``save_state``, which is
synchronous: it has no asynchronous save, so its users stall for the whole write; it calls no
``fsync``, so its save ends once the bytes reach the page cache) and the floor
(no library: the weights in one safetensors file and the optimizer state by ``torch.save``,
each fsync'ed; for the asynchronous save, a copy into host memory followed by that write).
The floors' stall measurements run in the reference's process, after its own (one interpreter
start fewer); every run of steps has its own process.

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
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

LAYERS = int(os.environ.get("BENCH_LAYERS", "16"))
WIDTH = int(os.environ.get("BENCH_WIDTH", "4096"))
SAVES = int(os.environ.get("BENCH_REPEATS", "3"))
WARM_STEPS = 4
"""Training steps before the first save of a stall measurement."""
STEPS = int(os.environ.get("BENCH_STEPS", "12"))
EVERY = int(os.environ.get("BENCH_EVERY", "4"))
STALL_ROWS = {
    "sync": "synchronous",
    "async": "async_save=True",
    "reference": "accelerate `save_state` (synchronous: it has no asynchronous save; no fsync)",
    "floor": "floor: hand-written safetensors + torch.save, fsync",
    "floor_async": "floor: copy into host memory (the stall), then the same write",
}
"""Worker mode -> row label of the stall table."""
RUN_ROWS = {
    "none": "none",
    "sync": "sync",
    "async": "async",
    "reference": "accelerate `save_state` (synchronous, no fsync)",
    "floor": "floor: plain torch loop, hand-written save with fsync",
}
"""Worker mode -> row label of the run table."""


def _model():
    import torch

    torch.manual_seed(0)
    model = torch.nn.Sequential(*[torch.nn.Linear(WIDTH, WIDTH, bias=False) for _ in range(LAYERS)])
    return model, torch.optim.SGD(model.parameters(), lr=1e-4, momentum=0.9)


def _build(folder: str, mode: str):
    """The accelerator (None for the floors), the model and its optimizer."""
    model, optimizer = _model()
    if mode.startswith("floor"):
        return None, model, optimizer
    if mode == "reference":
        from _checkpoint_sides import reference_accelerator

        accelerator = reference_accelerator(folder)
    else:
        from accel import Accelerator
        from accel.utils import ProjectConfiguration

        # The asynchronous mode turns it on for the project, as the docs advise: its host
        # memory is then prepared after the first optimizer step, before the first save.
        config = ProjectConfiguration(
            project_dir=folder,
            automatic_checkpoint_naming=True,
            total_limit=2,
            async_save=mode == "async",
        )
        accelerator = Accelerator(cpu=True, project_config=config)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, model, optimizer


def _step(accelerator, model, optimizer, batch) -> None:
    loss = model(batch).pow(2).mean()
    if accelerator is None:
        loss.backward()
    else:
        accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()


class _Saver:
    """One save of the mode: returns after the training loop may go on; ``wait`` commits."""

    def __init__(self, accelerator, model, optimizer, mode: str, folder: str) -> None:
        self.accelerator, self.model, self.optimizer = accelerator, model, optimizer
        self.mode, self.folder, self.count, self.pending = mode, folder, 0, None

    def save(self) -> None:
        from _checkpoint_sides import floor_save, host_copy

        if self.mode == "reference":
            self.accelerator.save_state()  # the reference has no asynchronous save
            return
        if self.accelerator is not None:
            handle = self.accelerator.save_state(async_save=self.mode == "async")
            self.pending = handle if self.mode == "async" else None
            return
        self.count += 1
        target = os.path.join(self.folder, f"checkpoint_{self.count % 2}")  # 2 kept
        if self.mode == "floor_async":
            self.pending = (host_copy(self.model, self.optimizer), target)
        else:
            floor_save(self.model.state_dict(), self.optimizer.state_dict(), target)

    def wait(self) -> None:
        from _checkpoint_sides import floor_save

        if self.pending is None:
            return
        if self.accelerator is not None:
            self.pending.wait()
        else:
            (weights, optimizer_state), target = self.pending
            floor_save(weights, optimizer_state, target)
        self.pending = None


def _stall(mode: str, folder: str) -> dict[str, float]:
    import torch

    accelerator, model, optimizer = _build(folder, mode)
    batch = torch.randn(4, WIDTH)
    # A few steps before the first save (optimizer state exists; a run rarely saves at once)
    for _ in range(WARM_STEPS):
        _step(accelerator, model, optimizer, batch)
    saver = _Saver(accelerator, model, optimizer, mode, folder)
    stalls, totals = [], []
    for _ in range(SAVES):
        start = time.perf_counter()
        saver.save()
        stalls.append(time.perf_counter() - start)
        saver.wait()
        totals.append(time.perf_counter() - start)
        _step(accelerator, model, optimizer, batch)
    return {
        "stall_s": statistics.median(stalls),
        "stall_first_s": stalls[0],
        "stall_later_s": statistics.median(stalls[1:] or stalls),
        "commit_s": statistics.median(totals),
    }


def worker(kind: str, mode: str, folder: str) -> dict[str, Any]:
    import torch

    if kind == "stall" and mode == "reference":  # the floors after it: one process fewer to start
        return {side: _stall(side, folder) for side in ("reference", "floor", "floor_async")}
    if kind == "stall":
        return _stall(mode, folder)
    accelerator, model, optimizer = _build(folder, mode)
    batch = torch.randn(4, WIDTH)
    _step(accelerator, model, optimizer, batch)
    saver = _Saver(accelerator, model, optimizer, mode, folder)
    start = time.perf_counter()
    for step in range(1, STEPS + 1):
        _step(accelerator, model, optimizer, batch)
        if mode != "none" and step % EVERY == 0:
            saver.save()
    if accelerator is not None:
        accelerator.end_training()  # waits for the last asynchronous save
    total = time.perf_counter() - start
    return {"run_s": total, "steps_per_s": STEPS / total}


def _run(kind: str, mode: str) -> dict[str, Any]:
    folder = tempfile.mkdtemp(prefix="accel_bench_async_")
    try:
        from _workers import run_worker_process  # benchmarks/_workers.py

        done = run_worker_process(
            __file__, "--worker", kind, mode, folder, env={"OMP_NUM_THREADS": "1"}
        )
        return done.require(f"worker {kind} {mode}")
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
    results: dict[str, Any] = {}
    for mode in ("sync", "async", "reference"):
        measured = _run("stall", mode)
        if mode == "reference":
            results.update({f"stall_{side}": row for side, row in measured.items()})
        else:
            results[f"stall_{mode}"] = measured
    if not args.stall_only:
        for mode in RUN_ROWS:
            results[f"run_{mode}"] = _run("run", mode)
    load_after = os.getloadavg()
    sync, asyn = results["stall_sync"], results["stall_async"]
    floor = results["stall_floor"]["commit_s"]
    lines = [
        f"Model: {LAYERS} x Linear({WIDTH}, {WIDTH}), {SAVES} saves per stall measurement.",
        "",
        "| save | stall, first save s | stall, later saves s | until committed s "
        "| until committed × floor |",
        "| --- | --- | --- | --- | --- |",
    ]
    for mode, name in STALL_ROWS.items():
        row = results[f"stall_{mode}"]
        lines.append(
            f"| {name} | {row['stall_first_s']:.2f} | {row['stall_later_s']:.2f} "
            f"| {row['commit_s']:.2f} | {row['commit_s'] / floor:.2f} |"
        )
    first = asyn["stall_first_s"] / sync["stall_first_s"]
    later = asyn["stall_later_s"] / sync["stall_later_s"]
    lines.append(f"\nstall ratio async/sync: first save {first:.1%}, later saves {later:.1%}\n")
    if "run_none" in results:
        run_floor = results["run_floor"]["run_s"]
        lines.append(f"| run of {STEPS} steps, save every {EVERY} | total s | steps/s | × floor |")
        lines.append("| --- | --- | --- | --- |")
        for mode, name in RUN_ROWS.items():
            row = results[f"run_{mode}"]
            lines.append(
                f"| {name} | {row['run_s']:.1f} | {row['steps_per_s']:.2f} "
                f"| {row['run_s'] / run_floor:.2f} |"
            )
    loads = f"load average before {load_before[0]:.1f}, after {load_after[0]:.1f}"
    lines.append(f"\n{loads} (1-minute), {os.cpu_count()} cores")
    print("\n".join(lines))
    print(json.dumps({**results, "load_before": load_before, "load_after": load_after}))
    if args.out is not None:
        body = "\n".join(["## Latest run of `bench_async_save.py`", "", *lines])
        write_section(args.out, "bench_async_save", "Checkpointing: async_save", body)


if __name__ == "__main__":
    main()

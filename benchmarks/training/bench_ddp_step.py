"""2-process DDP training step time: hand-written DDP vs accel's Accelerator vs the reference
library's Accelerator, same model, data and optimizer.

Two designs, both with every process under torchrun and ``OMP_NUM_THREADS=1``:

* paired (the ratio the target is judged on): one launch holds a hand-written DDP model and a
  model prepared by a library, built alike, and alternates their steps (swapping which goes
  first every step). Load from other work on the machine then hits both loops alike, and the
  two see the same process settings.
* separate launches: each loop alone in its own launch, as a user runs it, interleaved over
  rounds. Besides wall time it records the CPU time of each step (``time.thread_time``), which
  a loaded machine disturbs far less than wall time (a step mostly waits for the peer's
  all-reduce), and each process's torch thread counts, so a library that changed process
  settings would show.

Run: uv run --all-packages --group bench python benchmarks/training/bench_ddp_step.py
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

WORKER = r"""
import json, os, sys, time
import torch

design, library = sys.argv[1], sys.argv[2]
steps, warmup, blocks = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
n = 64 * (steps // blocks + warmup + 2) * 2
data = torch.utils.data.TensorDataset(torch.randn(n, 512), torch.randint(0, 10, (n,)))

def model_and_optimizer():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)

def hand_written():
    import torch.distributed as dist
    if not dist.is_initialized():
        dist.init_process_group("gloo")
    model, optimizer = model_and_optimizer()
    sampler = torch.utils.data.DistributedSampler(data, shuffle=False)
    loader = torch.utils.data.DataLoader(data, batch_size=64, sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(model)
    return model, optimizer, loader, lambda loss: loss.backward()

def with_library(name):
    if name == "copy":
        return hand_written()
    if name == "accel":
        from accel import Accelerator
        acc = Accelerator()
    else:
        from accelerate import Accelerator
        acc = Accelerator(cpu=True)
    assert acc.num_processes == 2, acc.num_processes
    model, optimizer = model_and_optimizer()
    loader = torch.utils.data.DataLoader(data, batch_size=64)
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    return model, optimizer, loader, acc.backward

def step(loop, batch):
    model, optimizer, _, backward = loop
    x, y = batch
    wall, cpu = time.perf_counter(), time.thread_time()
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    backward(loss)
    optimizer.step()
    return time.perf_counter() - wall, time.thread_time() - cpu

def run_block(block_steps, block):
    # Every block builds its loops anew (fresh memory for parameters, gradients and optimizer
    # states), alternating which is built first: where the allocations land makes one pair of
    # loops differ by up to 15% in either direction, even two identical hand-written loops.
    builders = {}
    if library != "ddp":
        builders[library] = lambda: with_library(library)
    if design == "paired" or library == "ddp":
        builders["ddp"] = hand_written
    names = list(builders) if block % 2 == 0 else list(reversed(builders))
    loops = {name: builders[name]() for name in names}
    iterators = {name: iter(loop[2]) for name, loop in loops.items()}
    samples = {name: [] for name in loops}
    for i in range(block_steps + warmup):
        order = names if i % 2 == 0 else list(reversed(names))
        batches = {name: next(iterators[name]) for name in order}
        for name in order:
            sample = step(loops[name], batches[name])
            if i >= warmup:
                samples[name].append(sample)
    return samples

# Block 0 builds the library's loop first: the library starts the process group, and the
# hand-written loop uses it.
times = {}
for block in range(blocks):
    for name, samples in run_block(steps // blocks, block).items():
        times.setdefault(name, []).append(samples)
import torch.distributed as dist
rank = dist.get_rank()
threads = [torch.get_num_threads(), torch.get_num_interop_threads()]
if rank == 0:
    print("RESULT " + json.dumps({"times": times, "threads": threads}), flush=True)
dist.barrier()
dist.destroy_process_group()
"""

NAMES = {
    "ddp": "hand-written DDP",
    "accel": "accel Accelerator",
    "accelerate": "accelerate Accelerator (reference)",
    "copy": "a second hand-written DDP loop (the noise floor)",
}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(design: str, library: str, worker: Path, args: argparse.Namespace) -> dict:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(worker),
        design,
        library,
        str(args.steps),
        str(args.warmup),
        str(args.blocks if design == "paired" else 1),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCEL_USE_CPU": "1"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1800)
    if out.returncode != 0:
        raise SystemExit(f"{design} {library} failed:\n{out.stderr[-3000:]}")
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[7:])


def ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--blocks", type=int, default=10, help="fresh loops per paired launch")
    parser.add_argument("--output", default="benchmarks/results/training_ddp_step.md")
    args = parser.parse_args()
    libraries = ["accel"]
    if importlib.util.find_spec("accelerate") is not None:
        libraries.append("accelerate")
    modes = ["ddp", *libraries]
    compared = [*libraries, "copy"]
    paired: dict[str, dict[str, list[float]]] = {lib: {lib: [], "ddp": []} for lib in compared}
    block_ratios: dict[str, list[float]] = {lib: [] for lib in compared}
    launch_ratios: dict[str, list[float]] = {lib: [] for lib in compared}
    wall: dict[str, list[float]] = {m: [] for m in modes}
    cpu: dict[str, list[float]] = {m: [] for m in modes}
    threads: dict[str, set[str]] = {m: set() for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        worker = Path(tmp, "worker.py")
        worker.write_text(WORKER)
        for _ in range(args.rounds):  # interleave launches so machine noise hits all of them
            for lib in compared:
                times = run("paired", lib, worker, args)["times"]
                ratios = []
                for hand_block, lib_block in zip(times["ddp"], times[lib]):
                    hand, ours = [w for w, _ in hand_block], [w for w, _ in lib_block]
                    paired[lib]["ddp"] += hand
                    paired[lib][lib] += ours
                    ratios.append(statistics.median(hand) / statistics.median(ours))
                block_ratios[lib] += ratios
                launch_ratios[lib].append(statistics.median(ratios))
            for mode in modes:
                result = run("separate", mode, worker, args)
                wall[mode] += [w for w, _ in result["times"][mode][0]]
                cpu[mode] += [c for _, c in result["times"][mode][0]]
                threads[mode].add("/".join(map(str, result["threads"])))
    import torch

    rows = [
        "# 2-process DDP training step: Accelerator vs hand-written DDP",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, gloo, "
        "2 processes under torchrun, OMP_NUM_THREADS=1. MLP 512-1024-1024-10 (1.6 M parameters), "
        f"AdamW, batch 64 per process; {args.rounds} rounds, each launch {args.steps} timed steps "
        f"(paired: in {args.blocks} blocks of fresh loops), {args.warmup} warm-up steps per "
        "block; load average at the end: "
        f"{', '.join(f'{v:.2f}' for v in os.getloadavg())}. Throughput ratio = hand-written "
        "step time / step time (higher is better; target >= 0.98x).",
        "",
        "## Paired: both loops in one launch, steps alternated",
        "",
        "Pooled: the medians over every step of the launches. Per block: the median over the "
        "blocks of each block's own ratio (per launch: over that launch's blocks), which a burst "
        "of load or one launch's memory placement moves less.",
        "",
        "| loop | hand-written median (ms) | library median (ms) | throughput, pooled | "
        "throughput, per block | per launch |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    for lib in compared:
        hand, ours = ms(paired[lib]["ddp"]), ms(paired[lib][lib])
        ratio = statistics.median(block_ratios[lib])
        per_launch = ", ".join(f"{r:.3f}" for r in launch_ratios[lib])
        rows.append(
            f"| {NAMES[lib]} | {hand:.2f} | {ours:.2f} | {hand / ours:.3f}x | {ratio:.3f}x | "
            f"{per_launch} |"
        )
    rows += [
        "",
        "## Separate launches",
        "",
        "| loop | median wall (ms) | wall throughput | median CPU (ms) | CPU throughput | "
        "torch threads / interop |",
        "| --- | ---: | ---: | ---: | ---: | --- |",
    ]
    base_wall, base_cpu = ms(wall["ddp"]), ms(cpu["ddp"])
    for mode in modes:
        w, c = ms(wall[mode]), ms(cpu[mode])
        rows.append(
            f"| {NAMES[mode]} | {w:.2f} | {base_wall / w:.3f}x | {c:.2f} | {base_cpu / c:.3f}x | "
            f"{', '.join(sorted(threads[mode]))} |"
        )
    text = "\n".join(rows) + "\n"
    print(text)
    Path(args.output).write_text(text)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(args.output)  # one PNG per table, shown under it


if __name__ == "__main__":
    main()

"""2-process DDP training step time: hand-written DDP vs accel's Accelerator vs the reference
library's Accelerator, same model, data and optimizer, each in its own torchrun launch.

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

mode, steps, warmup = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                            torch.nn.Linear(1024, 10))
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
data = torch.utils.data.TensorDataset(torch.randn(64 * (steps + warmup) * 2, 512),
                                      torch.randint(0, 10, (64 * (steps + warmup) * 2,)))
if mode == "ddp":
    import torch.distributed as dist
    dist.init_process_group("gloo")
    sampler = torch.utils.data.DistributedSampler(data, shuffle=False)
    loader = torch.utils.data.DataLoader(data, batch_size=64, sampler=sampler)
    model = torch.nn.parallel.DistributedDataParallel(model)
    backward = lambda loss: loss.backward()
    rank = dist.get_rank()
else:
    if mode == "accel":
        from accel import Accelerator
        acc = Accelerator()
    else:
        from accelerate import Accelerator
        acc = Accelerator(cpu=True)
    loader = torch.utils.data.DataLoader(data, batch_size=64)
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    backward = acc.backward
    rank = acc.process_index
    assert acc.num_processes == 2, acc.num_processes
times = []
for i, (x, y) in enumerate(loader):
    if i >= steps + warmup:
        break
    start = time.perf_counter()
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(x), y)
    backward(loss)
    optimizer.step()
    if i >= warmup:
        times.append(time.perf_counter() - start)
if rank == 0:
    print("RESULT " + json.dumps(times), flush=True)
if mode == "ddp":
    dist.destroy_process_group()
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def run(mode: str, worker: Path, steps: int, warmup: int) -> list[float]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        str(worker),
        mode,
        str(steps),
        str(warmup),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "ACCEL_USE_CPU": "1"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=900)
    if out.returncode != 0:
        raise SystemExit(f"{mode} failed:\n{out.stderr[-3000:]}")
    line = next(line for line in out.stdout.splitlines() if line.startswith("RESULT "))
    return json.loads(line[7:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=60)
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--output", default="benchmarks/results/training_ddp_step.md")
    args = parser.parse_args()
    modes = ["ddp", "accel"]
    if importlib.util.find_spec("accelerate") is not None:
        modes.append("accelerate")
    samples: dict[str, list[float]] = {m: [] for m in modes}
    with tempfile.TemporaryDirectory() as tmp:
        worker = Path(tmp, "worker.py")
        worker.write_text(WORKER)
        for _ in range(args.rounds):  # interleave modes so machine noise hits all of them
            for mode in modes:
                samples[mode] += run(mode, worker, args.steps, args.warmup)
    import torch

    base = statistics.median(samples["ddp"])
    rows = [
        "# 2-process DDP training step: Accelerator vs hand-written DDP",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores, torch {torch.__version__}, gloo, "
        "2 processes, OMP_NUM_THREADS=1. MLP 512-1024-1024-10 (1.6 M parameters), AdamW, "
        f"batch 64 per process; median over {args.rounds} launches x {args.steps} steps after "
        f"{args.warmup} warm-up steps. Throughput ratio = hand-written step time / step time "
        "(higher is better; target >= 0.98x).",
        "",
        "| loop | median step (ms) | throughput vs hand-written DDP |",
        "| --- | ---: | ---: |",
    ]
    names = {
        "ddp": "hand-written DDP",
        "accel": "accel Accelerator",
        "accelerate": "accelerate Accelerator (reference)",
    }
    for mode in modes:
        med = statistics.median(samples[mode])
        rows.append(f"| {names[mode]} | {med * 1000:.2f} | {base / med:.3f}x |")
    text = "\n".join(rows) + "\n"
    print(text)
    Path(args.output).write_text(text)


if __name__ == "__main__":
    main()

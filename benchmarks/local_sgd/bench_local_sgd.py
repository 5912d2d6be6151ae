"""2-process step time of LocalSGD (k = 1, 4, 16) against plain DDP: accel, the reference
library and the floor (the same steps written by hand with torch) side by side.

Each launch (2 processes under torchrun, gloo, ``OMP_NUM_THREADS=1``) uses one library: it
prepares the same MLP and SGD optimizer for each configuration (plain DDP, LocalSGD k=1, 4, 16)
and times blocks of steps, visiting the configurations in turn so that load from other work on
the machine hits them alike. Launches of the two libraries alternate over rounds. A step is
forward, backward, optimizer step and ``local_sgd.step()`` (which averages every k steps); a
block's time divided by its steps amortises the averaging, and the median is over blocks.
The accel launch also times the floor of each configuration, visited in the same turns: torch's
``DistributedDataParallel`` applied by hand, and local SGD by hand (an unwrapped model whose
parameters live in one flat buffer, all-reduced in place every k steps and on exit).

Run: uv run --all-packages --group bench python benchmarks/local_sgd/bench_local_sgd.py
"""

from __future__ import annotations

import argparse
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
import json, sys, time
import torch
import torch.distributed as dist
from torch.nn.utils import parameters_to_vector, vector_to_parameters

library, blocks, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
if library == "accel":
    from accel import Accelerator
    from accel.local_sgd import LocalSGD
else:
    from accelerate import Accelerator
    from accelerate.local_sgd import LocalSGD
acc = Accelerator(cpu=True)
x = torch.randn(64, 512)
y = torch.randint(0, 10, (64,))
configs = ["ddp", 1, 4, 16]
if library == "accel":
    # The floor, in the same launch, each right after its accel configuration: torch's DDP by
    # hand, and local SGD by hand (no DDP, parameters in one flat buffer all-reduced in place
    # every k steps and on exit).
    configs = [c for config in configs for c in (config, f"floor {config}")]

def build(config):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                                torch.nn.Linear(1024, 10))
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    if config == "floor ddp":
        return torch.nn.parallel.DistributedDataParallel(model), optimizer
    if str(config).startswith("floor"):
        return model, optimizer
    return acc.prepare(model, optimizer)

def step(model, optimizer, floor):
    loss = torch.nn.functional.cross_entropy(model(x), y)
    if floor:
        loss.backward()
    else:
        acc.backward(loss)
    optimizer.step()
    optimizer.zero_grad()

def flatten(model):
    # The parameters become views of one flat buffer, so averaging is one in-place all-reduce.
    flat = parameters_to_vector(model.parameters())
    vector_to_parameters(flat, model.parameters())
    return flat

def average(flat):
    dist.all_reduce(flat)
    flat.div_(dist.get_world_size())

times = {str(c): [] for c in configs}
for block in range(blocks):
    for config in configs:
        floor = str(config).startswith("floor")
        model, optimizer = build(config)
        step(model, optimizer, floor)  # warm-up
        acc.wait_for_everyone()
        # A block's time over its steps: the averaging every k steps is amortised in it.
        t = time.perf_counter()
        if config in ("ddp", "floor ddp"):
            for _ in range(steps):
                step(model, optimizer, floor)
        elif floor:
            k, flat = int(config.split()[1]), flatten(model)
            for i in range(steps):
                step(model, optimizer, floor)
                if (i + 1) % k == 0:
                    average(flat)
            average(flat)
        else:
            with LocalSGD(acc, model, local_sgd_steps=config) as local_sgd:
                for _ in range(steps):
                    step(model, optimizer, floor)
                    local_sgd.step()
        times[str(config)].append((time.perf_counter() - t) / steps)
if acc.is_main_process:
    print("RESULT " + json.dumps(times), flush=True)
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _launch(worker: str, library: str, blocks: int, steps: int) -> dict[str, list[float]]:
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        "--nproc_per_node=2",
        "--master_addr=127.0.0.1",
        f"--master_port={_free_port()}",
        worker,
        library,
        str(blocks),
        str(steps),
    ]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=1200)
    if out.returncode != 0:
        raise RuntimeError(out.stdout + out.stderr)
    line = next(s for s in out.stdout.splitlines() if s.startswith("RESULT "))
    return json.loads(line[len("RESULT ") :])  # type: ignore[no-any-return]


def _versions() -> str:
    import accelerate
    import torch

    return f"torch {torch.__version__}, accelerate {accelerate.__version__}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--blocks", type=int, default=8)
    parser.add_argument("--steps", type=int, default=32, help="timed steps per block (k | 16)")
    parser.add_argument("--output", type=Path, default=None)
    args = parser.parse_args()
    load_start = os.getloadavg()
    pooled: dict[str, dict[str, list[float]]] = {"accel": {}, "accelerate": {}}
    with tempfile.TemporaryDirectory() as tmp:
        worker = os.path.join(tmp, "worker.py")
        Path(worker).write_text(WORKER)
        for _ in range(args.rounds):
            for library in ("accel", "accelerate"):
                for config, times in _launch(worker, library, args.blocks, args.steps).items():
                    pooled[library].setdefault(config, []).extend(times)
    load_end = os.getloadavg()
    rows = [("ddp", "DDP"), ("1", "LocalSGD k=1"), ("4", "LocalSGD k=4"), ("16", "LocalSGD k=16")]
    lines = [
        "# LocalSGD step time vs DDP, 2 gloo processes",
        "",
        f"Machine: {platform.machine()}, {os.cpu_count()} cores (shared with other work), "
        f"{_versions()}, gloo, 2 processes under torchrun, OMP_NUM_THREADS=1. "
        "MLP 512-1024-1024-10 (1.6 M parameters), SGD, batch 64 per process. "
        f"{args.rounds} rounds x 1 launch per library x {args.blocks} blocks x {args.steps} "
        f"timed steps per configuration. Load average (1, 5, 15 min): start "
        f"{', '.join(f'{v:.2f}' for v in load_start)}, end "
        f"{', '.join(f'{v:.2f}' for v in load_end)}.",
        "",
        "Step time = a block's time / its steps (forward, backward, optimizer step, "
        "`local_sgd.step()`; the averaging every k steps and on exit amortised), median over "
        "blocks; speed-up = the same library's DDP median / this median.",
        "",
        "Floor = the same steps by hand in torch, timed in the accel launches: DDP by "
        "`torch.nn.parallel.DistributedDataParallel`; LocalSGD by an unwrapped model whose "
        "parameters are views of one flat buffer, `all_reduce`d in place every k steps and on "
        "exit.",
        "",
        "| configuration | floor: raw torch median (ms) | accel median (ms) | "
        "accel speed-up vs DDP | accelerate median (ms) | accelerate speed-up vs DDP | "
        "accel / floor time | accelerate / floor time | accel / accelerate time |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for config, label in rows:
        ours = statistics.median(pooled["accel"][config]) * 1e3
        ref = statistics.median(pooled["accelerate"][config]) * 1e3
        ours_ddp = statistics.median(pooled["accel"]["ddp"]) * 1e3
        ref_ddp = statistics.median(pooled["accelerate"]["ddp"]) * 1e3
        floor = statistics.median(pooled["accel"][f"floor {config}"]) * 1e3
        lines.append(
            f"| {label} | {floor:.2f} | {ours:.2f} | {ours_ddp / ours:.2f}x | {ref:.2f} | "
            f"{ref_ddp / ref:.2f}x | {ours / floor:.2f}x | {ref / floor:.2f}x | {ours / ref:.2f} |"
        )
    text = "\n".join(lines) + "\n"
    print(text)
    if args.output is not None:
        args.output.write_text(text)
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from _charts import write_charts  # benchmarks/_charts.py

        write_charts(args.output)  # one PNG per table, shown under it


if __name__ == "__main__":
    main()

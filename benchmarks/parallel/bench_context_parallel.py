"""Peak memory per process and step time: context parallelism (cp_size=2, ring attention over
2 gloo processes) vs the unsplit model on one process, for long sequences, with the reference
library's unsplit run (it has no context parallelism on CPU) and the floor (plain torch).

Run the comparison (each variant in fresh processes, because peak RSS only grows within a
process):

    uv run python benchmarks/parallel/bench_context_parallel.py [--seq 8192] [--steps 3] \
        [--out benchmarks/results/context_parallel.md]

One variant alone (what the driver starts through torchrun):

    python -m torch.distributed.run --nproc_per_node 2 \
        benchmarks/parallel/bench_context_parallel.py --worker cp --seq 8192 --result r.json

Every variant trains the same causal-attention model (``--layers`` blocks of width ``--dim``,
``F.scaled_dot_product_attention(is_causal=True)``, SGD) on the same batch of one sequence
of ``--seq`` tokens. The unsplit variant runs on one process; the cp variant splits every
sequence over 2 processes inside ``accelerator.maybe_context_parallel``; the floor and the
reference run unsplit on one process (plain torch; the reference's ``Accelerator``). A step is forward +
backward + optimizer step; the step time is the median over ``--steps`` steps after one
warm-up step (of the slower process). Memory is the peak resident set size (``VmHWM``) minus
the resident size just before the model was built, and minus the resident size once the
model was prepared (what the training steps add).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
VOCAB, HEADS = 256, 4


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _model(torch: Any, dim: int, layers: int, seq: int) -> Any:
    nn, F = torch.nn, torch.nn.functional

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.qkv = nn.Linear(dim, 3 * dim)
            self.proj = nn.Linear(dim, dim)
            self.mlp = nn.Sequential(nn.Linear(dim, 4 * dim), nn.GELU(), nn.Linear(4 * dim, dim))

        def forward(self, x: Any) -> Any:
            b, s, _ = x.shape
            q, k, v = self.qkv(x).view(b, s, 3, HEADS, dim // HEADS).permute(2, 0, 3, 1, 4)
            attn = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            x = x + self.proj(attn.transpose(1, 2).reshape(b, s, dim))
            return x + self.mlp(x)

    class Model(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.embed = nn.Embedding(VOCAB, dim)
            self.pos = nn.Embedding(seq, dim)
            self.blocks = nn.ModuleList(Block() for _ in range(layers))
            self.head = nn.Linear(dim, VOCAB)

        def forward(self, ids: Any, positions: Any) -> Any:
            x = self.embed(ids) + self.pos(positions)
            for block in self.blocks:
                x = block(x)
            return self.head(x)

    torch.manual_seed(0)
    return Model()


def _library(variant: str) -> Any:
    """The object that runs the steps: accel's or the reference's Accelerator, or none."""
    if variant == "floor":
        return None
    if variant == "accelerate":
        from accelerate import Accelerator as Reference

        return Reference(cpu=True)
    from accel import Accelerator
    from accel.utils import ParallelismConfig

    config = ParallelismConfig(cp_size=2) if variant == "cp" else None
    return Accelerator(cpu=True, parallelism_config=config)


def worker(variant: str, seq: int, dim: int, layers: int, steps: int, result: str) -> None:
    """Train ``steps + 1`` steps of one variant; rank 0 writes ``result``.

    ``cp`` and ``unsplit`` use accel, ``accelerate`` the reference library (unsplit: it has no
    context parallelism on CPU), ``floor`` the same model and loop in plain torch.
    """
    import contextlib

    import torch

    start_kb = _status_kb("VmRSS")
    model = _model(torch, dim, layers, seq)
    acc = _library(variant)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    if acc is not None:
        model, optimizer = acc.prepare(model, optimizer)
    prepared_kb = _status_kb("VmRSS")
    g = torch.Generator().manual_seed(0)
    times = []
    for step in range(steps + 1):
        ids = torch.randint(0, VOCAB, (1, seq), generator=g)
        positions = torch.arange(seq).unsqueeze(0)
        labels = torch.randint(0, VOCAB, (1, seq), generator=g)
        scope = (
            acc.maybe_context_parallel(
                buffers=[ids, positions, labels],
                buffer_seq_dims=[1, 1, 1],
                no_restore_buffers={ids, positions, labels},
            )
            if variant == "cp"
            else contextlib.nullcontext()
        )
        if acc is not None:
            acc.wait_for_everyone()
        start = time.perf_counter()
        with scope:
            logits = model(ids, positions)
            loss = torch.nn.functional.cross_entropy(logits.view(-1, VOCAB), labels.view(-1))
            if acc is None:
                loss.backward()
            else:
                acc.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        elapsed = time.perf_counter() - start
        if step:
            times.append(elapsed)
    peak_kb = _status_kb("VmHWM")
    added = [(peak_kb - start_kb) / 1024, (peak_kb - prepared_kb) / 1024]
    mine = torch.tensor([[statistics.median(times), *added]])
    gathered = mine if acc is None else acc.gather(mine)
    if acc is None or acc.is_main_process:
        rows = gathered.tolist()
        data = {
            "variant": variant,
            "processes": len(rows),
            "step_s": max(r[0] for r in rows),
            "added_mb": [round(r[1]) for r in rows],
            "training_mb": [round(r[2]) for r in rows],
        }
        Path(result).write_text(json.dumps(data))


def _run(variant: str, args: argparse.Namespace, folder: str) -> dict[str, Any] | None:
    """Run one variant in fresh processes (None: the reference library is not installed)."""
    from accel_state.testing import free_port

    result = os.path.join(folder, f"{variant}.json")
    command = [sys.executable]
    if variant in ("cp", "unsplit"):
        nproc = 2 if variant == "cp" else 1
        command += ["-m", "torch.distributed.run", f"--nproc_per_node={nproc}"]
        command += ["--master_addr=127.0.0.1", f"--master_port={free_port()}"]
    elif variant == "accelerate" and importlib.util.find_spec("accelerate") is None:
        return None
    # The one-process reference and floor need no launcher: they start no process group.
    command += [str(HERE), "--worker", variant]
    command += ["--seq", str(args.seq), "--dim", str(args.dim), "--layers", str(args.layers)]
    command += ["--steps", str(args.steps), "--result", result]
    subprocess.run(command, check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    return json.loads(Path(result).read_text())  # type: ignore[no-any-return]


LABELS = {
    "floor": "floor: plain torch, unsplit",
    "unsplit": "accel, unsplit",
    "cp": "accel, cp",
    "accelerate": "accelerate, unsplit (no context parallelism on CPU)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", choices=tuple(LABELS))
    parser.add_argument("--seq", type=int, default=8192)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--result")
    parser.add_argument("--out", default=str(HERE.parents[1] / "results" / "context_parallel.md"))
    args = parser.parse_args()
    if args.worker:
        worker(args.worker, args.seq, args.dim, args.layers, args.steps, args.result)
        return
    with tempfile.TemporaryDirectory() as folder:
        ran = [_run(v, args, folder) for v in ("floor", "unsplit", "cp", "accelerate")]
    rows = [row for row in ran if row is not None]
    floor_s = rows[0]["step_s"]
    lines = [
        "# Context parallelism: cp_size=2 vs the unsplit model",
        "",
        "`benchmarks/parallel/bench_context_parallel.py`: one sequence of "
        f"{args.seq} tokens, {args.layers} causal-attention blocks of width {args.dim} "
        f"({HEADS} heads), SGD, fp32, CPU, 1 thread per process; median of {args.steps} steps "
        "after one warm-up. Memory, per process: the peak RSS above the resident size before "
        "the model was built (model, Accelerator, process group, prepare and training), and "
        "above the resident size once the model was prepared (what the training steps add).",
        "",
        "The floor is the same model and loop in plain torch on one process. The reference "
        "library has no context parallelism on CPU (`ParallelismConfig(cp_size=2)` under "
        "`Accelerator(cpu=True)` raises: it needs FSDP2 or a GPU-type multi-device setup), so "
        "its users train the unsplit model on one process: that is its row.",
        "",
        "| variant | processes | step time (s) | × floor | peak added from start (MB) | "
        "peak added by training (MB) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in rows:
        memory = ", ".join(str(m) for m in row["added_mb"])
        training = ", ".join(str(m) for m in row["training_mb"])
        lines.append(
            f"| {LABELS[row['variant']]} | {row['processes']} | {row['step_s']:.2f} | "
            f"{row['step_s'] / floor_s:.2f}x | {memory} | {training} |"
        )
    lines += ["", f"Machine: {platform.machine()}, {os.cpu_count()} CPUs, Python "]
    lines[-1] += f"{platform.python_version()}."
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text("\n".join(lines) + "\n")
    sys.path.insert(0, str(HERE.parents[1]))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(args.out)  # one PNG per table, shown under it
    print("\n".join(lines))


if __name__ == "__main__":
    main()

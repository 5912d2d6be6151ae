"""Step time and peak memory per process: DDP vs FSDP2 vs DeepSpeed ZeRO-2 vs ZeRO-3, accel vs
accelerate.

Run the whole comparison (each configuration in its own pair of fresh processes, because peak
RSS only grows within a process):

    TORCH_EXTENSIONS_DIR=~/.cache/accel/torch_extensions \
        uv run python benchmarks/engines/bench_engines.py [--steps 20] [--out PATH]

One configuration alone (what the driver starts through torchrun):

    python -m torch.distributed.run --nproc_per_node 2 benchmarks/engines/bench_engines.py \
        --worker --lib accel --engine zero3 --result r.json

Every configuration trains the same MLP (same seed, same data, AdamW, clipping to 1.0, fp32)
with the library's documented loop: ``prepare``, ``backward``, ``clip_grad_norm_``,
``optimizer.step``, ``zero_grad``. Step time is the median over the timed steps of the slower
process; memory is the peak resident set size (``VmHWM``) of each process, and the same peak
minus the resident size measured just before the model was built (what training added on top
of the imported libraries).

Each engine also has a floor: the same loop written by hand with no library, in the same pair of
fresh processes (``--lib floor``): ``DistributedDataParallel``, ``fully_shard`` on each Linear
then the root, or ``deepspeed.initialize`` with the same ZeRO stage; process ``r`` takes
batches ``r, r + 2, ...`` of the data by slicing, as the libraries' sharded loaders give them.
"""

from __future__ import annotations

import argparse
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
ENGINES = ("ddp", "fsdp2", "zero2", "zero3")
LIBS = ("accel", "accelerate", "floor")
FLOOR_NAMES = {
    "ddp": "floor: torch DistributedDataParallel by hand",
    "fsdp2": "floor: torch fully_shard by hand",
    "zero2": "floor: deepspeed.initialize by hand",
    "zero3": "floor: deepspeed.initialize by hand",
}
WIDTH, DEPTH, BATCH = 1024, 8, 16


def _zero_config(engine: str) -> dict:
    """The DeepSpeed config of a ``zero<stage>`` engine, with the batch sizes written out for
    the world of 2 processes."""
    return {
        "train_batch_size": 2 * BATCH,
        "train_micro_batch_size_per_gpu": BATCH,
        "gradient_accumulation_steps": 1,
        "gradient_clipping": 1.0,
        "zero_optimization": {"stage": int(engine[-1])},
        "zero_allow_untested_optimizer": True,
    }


def _status_kb(field: str) -> int:
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"/proc/self/status has no {field}")


def _build(torch: Any) -> Any:
    torch.manual_seed(0)
    layers: list[Any] = []
    for _ in range(DEPTH):
        layers += [torch.nn.Linear(WIDTH, WIDTH), torch.nn.GELU()]
    return torch.nn.Sequential(*layers, torch.nn.Linear(WIDTH, 1))


def worker(lib: str, engine: str, steps: int, warmup: int, result: str) -> None:
    """Train ``steps + warmup`` steps under one configuration; rank 0 writes ``result``."""
    import torch
    import torch.distributed as dist
    from torch.utils.data import DataLoader, TensorDataset

    if lib == "floor":
        _floor_worker(engine, steps, warmup, result)
        return
    if lib == "accel":
        from accel import Accelerator, DeepSpeedPlugin, FullyShardedDataParallelPlugin
    else:
        from accelerate import Accelerator
        from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin

    kwargs: dict[str, Any] = {}
    if engine in ("ddp", "fsdp2") and lib == "accelerate":
        kwargs["cpu"] = True  # without it accelerate sees one process on a CPU-only machine
    if engine == "fsdp2":
        # Each Linear is its own FSDP unit: gathered before its forward, freed after.
        kwargs["fsdp_plugin"] = FullyShardedDataParallelPlugin(
            fsdp_version=2,
            auto_wrap_policy="TRANSFORMER_BASED_WRAP",
            transformer_cls_names_to_wrap=["Linear"],
        )
    elif engine.startswith("zero") and lib == "accel":
        kwargs["deepspeed_plugin"] = DeepSpeedPlugin(
            zero_stage=int(engine[-1]), gradient_clipping=1.0, gradient_accumulation_steps=1
        )
    elif engine.startswith("zero"):
        # With cpu=True accelerate drops DeepSpeed silently (the run is DDP); without it, its
        # state counts one process on a CPU-only machine, so its "auto" batch sizes would not
        # match DeepSpeed's world of 2: write them out, and enable DeepSpeed by environment.
        os.environ["ACCELERATE_USE_DEEPSPEED"] = "true"
        config = _zero_config(engine)
        kwargs["deepspeed_plugin"] = DeepSpeedPlugin(hf_ds_config=config)
    acc = Accelerator(**kwargs)
    seen = acc.num_processes
    base_kb = _status_kb("VmRSS")
    model = _build(torch)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    g = torch.Generator().manual_seed(0)
    n = BATCH * 2 * (steps + warmup)
    x = torch.randn(n, WIDTH, generator=g)
    data = TensorDataset(x, x.mean(dim=1, keepdim=True))
    model, opt, loader = acc.prepare(model, opt, DataLoader(data, batch_size=BATCH))
    times, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        if i == steps + warmup:  # a library that does not shard the data sees more batches
            break
        dist.barrier()
        start = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        acc.backward(loss)
        acc.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad()
        elapsed = time.perf_counter() - start
        if i >= warmup:
            times.append(elapsed)
        losses.append(loss.item())
    mine = {
        "lib": lib,
        "engine": engine,
        "peak_kb": _status_kb("VmHWM"),
        "base_kb": base_kb,
        "final_loss": losses[-1],
        "seen_processes": seen,
        "distributed_type": str(getattr(acc.distributed_type, "value", acc.distributed_type)),
        "ds_sharded": any(hasattr(p, "ds_id") for p in model.parameters()),
        "dtensor": any(type(p).__name__ == "DTensor" for p in model.parameters()),
    }
    _report(result, times, mine)


def _floor_worker(engine: str, steps: int, warmup: int, result: str) -> None:
    """The same training with no library: the engine's own API called by hand."""
    import torch
    import torch.distributed as dist

    dist.init_process_group("gloo")
    base_kb = _status_kb("VmRSS")
    model = _build(torch)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(BATCH * 2 * (steps + warmup), WIDTH, generator=g)
    y, rank = x.mean(dim=1, keepdim=True), dist.get_rank()
    # Batch k of the data goes to process k % 2, as the libraries' sharded loaders do.
    starts = range(rank * BATCH, len(x), 2 * BATCH)
    loader = [(x[s : s + BATCH], y[s : s + BATCH]) for s in starts]
    sharded = False
    if engine == "ddp":
        model = torch.nn.parallel.DistributedDataParallel(model)
    elif engine == "fsdp2":
        from torch.distributed.fsdp import fully_shard

        for layer in model:
            if isinstance(layer, torch.nn.Linear):
                fully_shard(layer)
        fully_shard(model)
        sharded = any(type(p).__name__ == "DTensor" for p in model.parameters())
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4)
    if engine.startswith("zero"):
        import deepspeed

        config = _zero_config(engine)
        model, opt, _, _ = deepspeed.initialize(model=model, optimizer=opt, config=config)
        backward, step = model.backward, model.step
    else:

        def backward(loss: Any) -> None:
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)

        def step() -> None:
            opt.step()
            opt.zero_grad()

    times, losses = [], []
    for i, (xb, yb) in enumerate(loader):
        dist.barrier()
        start = time.perf_counter()
        loss = torch.nn.functional.mse_loss(model(xb), yb)
        backward(loss)
        step()
        if i >= warmup:
            times.append(time.perf_counter() - start)
        losses.append(loss.item())
    _report(
        result,
        times,
        {
            "lib": "floor",
            "engine": engine,
            "peak_kb": _status_kb("VmHWM"),
            "base_kb": base_kb,
            "final_loss": losses[-1],
            "seen_processes": dist.get_world_size(),
            "distributed_type": {"ddp": "DDP", "fsdp2": "FSDP2"}.get(engine, "DeepSpeed"),
            "ds_sharded": engine != "zero3" or any(hasattr(p, "ds_id") for p in model.parameters()),
            "dtensor": sharded,
        },
    )


def _report(result: str, times: list[float], mine: dict[str, Any]) -> None:
    """Gather each process's figures; rank 0 writes the row to ``result``."""
    import torch
    import torch.distributed as dist

    per_rank: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(per_rank, {**mine, "times": times})
    if dist.get_rank() == 0:
        slowest = [max(r["times"][k] for r in per_rank) for k in range(len(times))]
        out = {
            "lib": mine["lib"],
            "engine": mine["engine"],
            "step_ms": 1000 * statistics.median(slowest),
            "peak_mb": [r["peak_kb"] / 1024 for r in per_rank],
            "added_mb": [(r["peak_kb"] - r["base_kb"]) / 1024 for r in per_rank],
            "final_loss": per_rank[0]["final_loss"],
            "seen_processes": per_rank[0]["seen_processes"],
            "distributed_type": per_rank[0]["distributed_type"],
            "zero3_params_sharded": per_rank[0]["ds_sharded"],
            "fsdp_params_sharded": per_rank[0]["dtensor"],
            "params": sum(p.numel() for p in _build(torch).parameters()),
        }
        Path(result).write_text(json.dumps(out))


def drive(steps: int, warmup: int, out: Path, timeout: float) -> None:
    """Run every configuration in fresh processes and write the Markdown table."""
    import torch
    from accel_state.testing import free_port

    rows = []
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    for engine in ENGINES:
        for lib in LIBS:
            with tempfile.TemporaryDirectory() as tmp:
                result = Path(tmp) / "r.json"
                command = [
                    sys.executable,
                    "-m",
                    "torch.distributed.run",
                    "--nproc_per_node=2",
                    "--master_addr=127.0.0.1",
                    f"--master_port={free_port()}",
                    str(HERE),
                    "--worker",
                    f"--lib={lib}",
                    f"--engine={engine}",
                    f"--steps={steps}",
                    f"--warmup={warmup}",
                    f"--result={result}",
                ]
                proc = subprocess.run(
                    command, env=env, capture_output=True, text=True, timeout=timeout
                )
                if proc.returncode != 0 or not result.exists():
                    tail = (proc.stdout + proc.stderr)[-3000:]
                    rows.append({"lib": lib, "engine": engine, "error": tail})
                    print(f"{lib} {engine}: FAILED\n{tail}", flush=True)
                    continue
                row = json.loads(result.read_text())
                rows.append(row)
                print(
                    f"{lib:10s} {engine:5s} {row['step_ms']:8.1f} ms  peak "
                    f"{max(row['peak_mb']):7.0f} MB  added {max(row['added_mb']):7.0f} MB",
                    flush=True,
                )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(_table(rows, steps, warmup, torch.__version__))
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(out)  # one PNG per table, shown under it


def _table(rows: list[dict[str, Any]], steps: int, warmup: int, torch_version: str) -> str:
    import deepspeed

    params = next((r["params"] for r in rows if "params" in r), 0)
    names = {
        "ddp": "DDP",
        "fsdp2": "FSDP2",
        "zero2": "DeepSpeed ZeRO-2",
        "zero3": "DeepSpeed ZeRO-3",
    }
    lines = [
        "# Engines: DDP vs FSDP2 vs DeepSpeed ZeRO-2 vs ZeRO-3 (accel and accelerate)",
        "",
        f"2 gloo processes on one machine ({platform.machine()}, {os.cpu_count()} cores, shared "
        f"with other jobs), torch {torch_version}, DeepSpeed {deepspeed.__version__}. Model: "
        f"MLP of {DEPTH} x Linear({WIDTH}, {WIDTH}) + GELU, {params / 1e6:.1f} M parameters "
        f"(fp32), AdamW, clipping to 1.0, batch {BATCH} per process; {steps} timed steps after "
        f"{warmup} warm-up steps. Each row ran in its own pair of fresh processes, rows one "
        "after another.",
        "",
        "Step = forward + backward + clip + optimizer step (DeepSpeed's step runs inside "
        "`backward`), median over steps of the slower process. Peak RSS = `VmHWM` of each "
        "process (rank 0 / rank 1), imported libraries included. Added = peak minus the "
        "resident size just before the model was built; accelerate imports DeepSpeed when "
        "the Accelerator is created and accel only at `prepare`, so accel's added column "
        "includes DeepSpeed's import (about 150 MB): compare peaks across libraries.",
        "",
        "accelerate needs two workarounds on a CPU-only machine, applied here: `cpu=True` for "
        "DDP and FSDP (else it sees 1 process), and for DeepSpeed `ACCELERATE_USE_DEEPSPEED=true` with "
        "batch sizes written in the config instead of `cpu=True`, which silently trains with "
        'DDP instead of DeepSpeed. Its state then still counts 1 process (column "processes '
        'seen"), so it does not shard the data: each process reads every batch (same batch '
        "size, so the same work per step, but a different loss trajectory).",
        "",
        "The floor rows train the same model with no library (the engine's own API called by "
        "hand, each process slicing its batches of the data); `× floor` is a row's step time over its engine's "
        "floor.",
        "",
        "| engine | library | processes seen | distributed type | step (ms) | × floor "
        "| peak RSS rank 0 / 1 (MB) | added rank 0 / 1 (MB) | loss after last step |",
        "| --- | --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    floors = {r["engine"]: r["step_ms"] for r in rows if r["lib"] == "floor" and "error" not in r}
    for row in rows:
        if row["engine"] == "zero3" and not row.get("zero3_params_sharded", True):
            lines.insert(-2, f"WARNING: {row['lib']} ZeRO-3 parameters were not sharded.\n")
        if row["engine"] == "fsdp2" and not row.get("fsdp_params_sharded", True):
            lines.insert(-2, f"Note: {row['lib']} FSDP2 parameters were not sharded (DTensor).\n")
    for row in rows:
        name = names[row["engine"]]
        lib = FLOOR_NAMES[row["engine"]] if row["lib"] == "floor" else row["lib"]
        if "error" in row:
            lines.append(f"| {name} | {lib} | | | failed | | | | |")
            continue
        peak = " / ".join(f"{v:,.0f}" for v in row["peak_mb"])
        added = " / ".join(f"{v:,.0f}" for v in row["added_mb"])
        floor = floors.get(row["engine"])
        ratio = f"{row['step_ms'] / floor:.2f}x" if floor else ""
        lines.append(
            f"| {name} | {lib} | {row['seen_processes']} | {row['distributed_type']} "
            f"| {row['step_ms']:,.1f} | {ratio} "
            f"| {peak} | {added} | {row['final_loss']:.5f} |"
        )
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--worker", action="store_true")
    parser.add_argument("--lib", choices=LIBS, default="accel")
    parser.add_argument("--engine", choices=ENGINES, default="ddp")
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--result", default="")
    parser.add_argument("--timeout", type=float, default=900)
    parser.add_argument(
        "--out",
        type=Path,
        default=HERE.parents[1] / "results" / "engines.md",
    )
    args = parser.parse_args()
    if args.worker:
        worker(args.lib, args.engine, args.steps, args.warmup, args.result)
    else:
        drive(args.steps, args.warmup, args.out, args.timeout)


if __name__ == "__main__":
    main()

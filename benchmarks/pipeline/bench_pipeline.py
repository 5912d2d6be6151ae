"""Throughput of pipelined inference on 2 processes vs one process running the whole model.

Run from the repository root (``--group bench`` adds the reference library):

    uv run --group bench python benchmarks/pipeline/bench_pipeline.py [--iters 8] [--out PATH]

The driver starts every measurement in its own processes:

- ``whole`` (the floor: the least work that gives the same logits): one process runs the
  unsplit model in plain torch, with 1 and with 2 threads;
- ``accel``: ``accel.inference.prepare_pippy`` on 2 gloo processes of 1 thread each, one row
  per ``num_chunks``;
- ``floor``: the same 2 processes running ``torch.distributed.pipelining`` by hand (``pipeline``
  split at the middle layer, as accel's ``'auto'`` chooses here, then ``ScheduleGPipe``), one
  row per ``num_chunks``;
- ``accelerate``: the reference library's ``prepare_pippy`` on the same 2 processes, or the exact
  reason it cannot run here.

The model is a GPT-2 classifier built from a config (random weights). Each measurement times
``--iters`` calls after 2 warm-up calls; the median call time gives samples per second.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
BATCH = 16
SEQ = 64
CHUNKS = (1, 2, 4, 8)
CONFIG = dict(vocab_size=2000, n_positions=SEQ, n_embd=256, n_layer=8, n_head=8, num_labels=4)


def build_model() -> torch.nn.Module:
    from transformers import GPT2Config, GPT2ForSequenceClassification

    torch.manual_seed(0)
    config = GPT2Config(**CONFIG, pad_token_id=0, bos_token_id=1, eos_token_id=1, use_cache=False)
    return GPT2ForSequenceClassification(config).eval()


def batch() -> torch.Tensor:
    return torch.randint(
        1, CONFIG["vocab_size"], (BATCH, SEQ), generator=torch.Generator().manual_seed(1)
    )


def time_calls(call: Any, iters: int, sync: Any = None) -> float:
    for _ in range(2):
        call()
    times = []
    for _ in range(iters):
        if sync:
            sync()
        start = time.perf_counter()
        call()
        if sync:
            sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def run_whole(iters: int) -> None:
    model, x = build_model(), batch()
    with torch.no_grad():
        seconds = time_calls(lambda: model(x), iters)
    print(json.dumps({"mode": "whole", "threads": torch.get_num_threads(), "seconds": seconds}))


def run_accel(iters: int) -> None:
    import torch.distributed as dist
    from accel import PartialState
    from accel.inference import prepare_pippy

    state = PartialState()
    x = batch()
    for chunks in CHUNKS:
        model = build_model()
        reference = model(x).logits
        model = prepare_pippy(model, example_args=(x,), num_chunks=chunks)
        out = model(x)
        if state.is_last_process:
            diff = (out.logits - reference).abs().max().item()
        seconds = time_calls(lambda m=model: m(x), iters, sync=dist.barrier)
        if state.is_last_process:
            row = {"mode": "accel", "chunks": chunks, "seconds": seconds, "max_diff": diff}
            row["split_points"] = model.pippy_split_points
            print(json.dumps(row), flush=True)


class _Logits(torch.nn.Module):
    """The classifier as plain torch pipelining needs it: the ids copied at the start of the
    graph (the head reads them in the last stage, which gets only activations) and the logits
    returned as a tensor."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids.clone()).logits


def run_floor(iters: int) -> None:
    """Hand-written ``torch.distributed.pipelining``: accel's split point, ``ScheduleGPipe``."""
    import torch.distributed as dist
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    dist.init_process_group("gloo")
    rank, x = dist.get_rank(), batch()
    split = {f"model.transformer.h.{CONFIG['n_layer'] // 2}": SplitPoint.BEGINNING}
    for chunks in CHUNKS:
        pipe = pipeline(_Logits(build_model()), mb_args=(x[: BATCH // chunks],), split_spec=split)
        schedule = ScheduleGPipe(pipe.build_stage(rank, device=torch.device("cpu")), chunks)

        def call(schedule: Any = schedule) -> Any:
            with torch.no_grad():
                return schedule.step(x) if rank == 0 else schedule.step()

        seconds = time_calls(call, iters, sync=dist.barrier)
        if rank == 1:
            print(json.dumps({"mode": "floor", "chunks": chunks, "seconds": seconds}), flush=True)
    dist.destroy_process_group()


def run_accelerate(iters: int, example: str = "batch") -> None:
    import accelerate
    import torch.distributed as dist
    from accelerate import PartialState
    from accelerate.inference import prepare_pippy

    state = PartialState(cpu=True)
    x = batch()
    model = build_model()
    # "batch": the example is a whole batch, as in the seed walk-through; "chunk": one chunk
    # (batch / num_chunks rows), which is what torch.distributed.pipelining traces.
    sample = x if example == "batch" else x[: BATCH // 2]
    model = prepare_pippy(model, example_args=(sample,), num_chunks=2)
    seconds = time_calls(lambda: model(x), iters, sync=dist.barrier)
    if state.is_last_process:
        print(
            json.dumps(
                {
                    "mode": "accelerate",
                    "version": accelerate.__version__,
                    "chunks": 2,
                    "seconds": seconds,
                    "example": example,
                }
            )
        )


def _rows(cmd: list[str], env: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=1200, cwd=ROOT
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return rows, "" if proc.returncode == 0 else proc.stderr


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "Error" in line and not line.startswith(" ")]
    return lines[0] if lines else stderr.strip().splitlines()[-1] if stderr.strip() else "?"


def drive(iters: int, out: Path) -> None:
    me = [sys.executable, str(Path(__file__).resolve())]
    from accel_state.testing import free_port

    def torchrun() -> list[str]:  # a free port per launch: other jobs may hold the default one
        return [
            sys.executable,
            "-m",
            "torch.distributed.run",
            "--nproc_per_node",
            "2",
            f"--master_port={free_port()}",
        ]

    results: list[dict[str, Any]] = []
    for threads in (1, 2):
        rows, err = _rows(
            [*me, "--mode", "whole", "--iters", str(iters)], {"OMP_NUM_THREADS": str(threads)}
        )
        assert rows, err
        results += rows
    rows, err = _rows(
        [*torchrun(), *me[1:], "--mode", "accel", "--iters", str(iters)], {"OMP_NUM_THREADS": "1"}
    )
    assert rows, err
    results += rows
    rows, err = _rows(
        [*torchrun(), *me[1:], "--mode", "floor", "--iters", str(iters)], {"OMP_NUM_THREADS": "1"}
    )
    assert rows, err
    results += rows
    reference_errors = {}
    for example in ("batch", "chunk"):
        rows, err = _rows(
            [
                *torchrun(),
                *me[1:],
                "--mode",
                "accelerate",
                "--iters",
                str(iters),
                "--example",
                example,
            ],
            {"OMP_NUM_THREADS": "1"},
        )
        if not rows:
            reference_errors[example] = _last_error(err)
        results += rows
    write_table(results, reference_errors, iters, out)


def write_table(
    results: list[dict[str, Any]], reference_errors: dict[str, str], iters: int, out: Path
) -> None:
    whole1 = next(r["seconds"] for r in results if r["mode"] == "whole" and r["threads"] == 1)
    lines = [
        "# accel-pipeline: pipelined inference throughput on 2 processes",
        "",
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, torch "
        f"{torch.__version__}, gloo. Model: `GPT2ForSequenceClassification` from a config "
        f"({CONFIG['n_layer']} layers, n_embd {CONFIG['n_embd']}, vocab {CONFIG['vocab_size']}), "
        f"batch {BATCH} x {SEQ} tokens, float32, no gradients. Median of {iters} calls after 2 "
        "warm-up calls; pipelined rows use 2 processes x 1 thread, chunk size = batch / "
        "num_chunks, and time each call between two barriers.",
        "",
        "| setup | processes x threads | num_chunks | chunk size | ms / batch | samples / s "
        "| vs whole model, 1 thread |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]
    for r in results:
        ms, rate = r["seconds"] * 1e3, BATCH / r["seconds"]
        speed = f"{whole1 / r['seconds']:.2f}x"
        if r["mode"] == "whole":
            lines.append(
                f"| floor: whole model, plain torch | 1 x {r['threads']} | - | {BATCH} | "
                f"{ms:.0f} | {rate:.1f} | {speed} |"
            )
        elif r["mode"] == "floor":
            lines.append(
                f"| floor: torch.distributed.pipelining by hand | 2 x 1 | {r['chunks']} | "
                f"{BATCH // r['chunks']} | {ms:.0f} | {rate:.1f} | {speed} |"
            )
        elif r["mode"] == "accel":
            lines.append(
                f"| accel prepare_pippy | 2 x 1 | {r['chunks']} | "
                f"{BATCH // r['chunks']} | {ms:.0f} | {rate:.1f} | {speed} |"
            )
        else:
            lines.append(
                f"| accelerate {r['version']} prepare_pippy ({r['example']} example) | 2 x 1 | {r['chunks']} | "
                f"{BATCH // r['chunks']} | {ms:.0f} | {rate:.1f} | {speed} |"
            )
    for example in reference_errors:
        lines.append(
            f"| accelerate prepare_pippy ({example} example): failed (error below the table) "
            f"| 2 x 1 | 2 | {BATCH // 2} | | | |"
        )
    accel_rows = [r for r in results if r["mode"] == "accel"]
    if accel_rows:
        lines += [
            "",
            f"Split point chosen by `split_points='auto'`: {accel_rows[0]['split_points']}; "
            f"largest difference of pipelined logits from the unsplit model: "
            f"{max(r['max_diff'] for r in accel_rows):.1e}.",
        ]
    described = {
        "batch": f"example_args of one whole batch ({BATCH} rows, as in the seed walk-through)",
        "chunk": f"example_args of one chunk ({BATCH // 2} rows), called with {BATCH} rows",
    }
    for example, error in reference_errors.items():
        lines += [
            "",
            f"The reference library's `prepare_pippy` with {described[example]} failed on this "
            f"model: `{error}`",
        ]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(out)  # one PNG per table, shown under it
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--mode", choices=["drive", "whole", "floor", "accel", "accelerate"], default="drive"
    )
    parser.add_argument("--iters", type=int, default=8)
    parser.add_argument("--example", choices=["batch", "chunk"], default="batch")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/pipeline.md")
    args = parser.parse_args()
    if args.mode == "drive":
        drive(args.iters, args.out)
    elif args.mode == "accelerate":
        run_accelerate(args.iters, args.example)
    else:
        {"whole": run_whole, "floor": run_floor, "accel": run_accel}[args.mode](args.iters)


if __name__ == "__main__":
    main()

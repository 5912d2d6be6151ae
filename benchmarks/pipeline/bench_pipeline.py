"""Throughput of pipelined inference on 2 processes: accel vs hand-written pipelining, one launch.

Run from the repository root (``--group bench`` adds the reference library):

    uv run --group bench python benchmarks/pipeline/bench_pipeline.py [--iters 30] [--chunks 1,2,4,8] [--out PATH]

One launch of 2 gloo processes of 1 thread builds, for each ``num_chunks``, from the same
weights and inputs: accel's ``prepare_pippy``, the hand-written floor
(``torch.distributed.pipelining`` cut at accel's split point, ``ScheduleGPipe``) and accel's own
schedule called directly (to tell where a gap comes from), then alternates them (2 warm-up
calls each, ``--iters`` timed rounds, the order rotating every round; each call timed between
two barriers) and checks they give the same logits. Other launches time the unsplit model
(plain torch, 1 and 2 threads) and try the reference library's ``prepare_pippy``. The page gets
each side's median and interquartile range, and the paired ratio accel / floor of each round:
a gap whose range excludes 1.00 is not noise. The model is a GPT-2 classifier from a config.

The page is shared with ``bench_stage_memory.py``: this script replaces only its own section.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))
from _machine import write_section  # noqa: E402  (benchmarks/_machine.py)

TITLE = "accel-pipeline: pipelined inference throughput on 2 processes"
SECTION = "pipeline"
BATCH = 16
SEQ = 64
CHUNKS = (1, 2, 4, 8)
WARMUP = 2
MIN_ROUNDS = 5
"""Fewer timed rounds than this give quartiles too rough to call a gap."""
CONFIG = dict(vocab_size=2000, n_positions=SEQ, n_embd=256, n_layer=8, n_head=8, num_labels=4)
SIDES = ("accel", "schedule", "floor")
"""The sides the interleaved launch alternates: accel's call, accel's schedule called directly,
the hand-written floor."""


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
    for _ in range(WARMUP):
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


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of ``values``, interpolated linearly between ranks."""
    ordered = sorted(values)
    at = (len(ordered) - 1) * q
    low = int(at)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (at - low)


def summary(values: Sequence[float]) -> dict[str, float]:
    """Median and quartiles of ``values``."""
    return {
        "median": quantile(values, 0.5),
        "q1": quantile(values, 0.25),
        "q3": quantile(values, 0.75),
    }


def run_whole(iters: int) -> None:
    """The unsplit model in this process, with 1 then 2 threads."""
    model, x = build_model(), batch()
    for threads in (1, 2):
        torch.set_num_threads(threads)
        with torch.no_grad():
            seconds = time_calls(lambda: model(x), iters)
        print(json.dumps({"mode": "whole", "threads": threads, "seconds": seconds}), flush=True)


class _Logits(torch.nn.Module):
    """The classifier as plain torch pipelining needs it: the ids copied at the start of the
    graph (the head reads them in the last stage, which gets only activations) and the logits
    returned as a tensor."""

    def __init__(self, model: torch.nn.Module) -> None:
        super().__init__()
        self.model = model

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model(ids.clone()).logits


def _stepper(schedule: Any, rank: int, x: torch.Tensor) -> Callable[[], Any]:
    """One call of a ``torch.distributed.pipelining`` schedule: rank 0 feeds the batch."""

    def step() -> Any:
        with torch.no_grad():
            return schedule.step(x) if rank == 0 else schedule.step()

    return step


def _logits(out: Any) -> torch.Tensor:
    if isinstance(out, (tuple, list)):
        return out[0]
    return out if isinstance(out, torch.Tensor) else out.logits


def _operations(stage: torch.nn.Module) -> dict[str, int]:
    """How often each operation is called in a stage's graphs (its submodules' included)."""
    counts: dict[str, int] = {}
    for module in stage.modules():
        graph = getattr(module, "graph", None)
        for node in graph.nodes if isinstance(graph, torch.fx.Graph) else ():
            if node.op == "call_function":
                counts[str(node.target)] = counts.get(str(node.target), 0) + 1
    return counts


def _all(flag: bool) -> bool:
    """Whether ``flag`` holds on every process (a collective: every process calls it)."""
    import torch.distributed as dist

    failed = torch.tensor([0 if flag else 1])
    dist.all_reduce(failed)
    return not int(failed.item())


def _wrapper_costs(model: Any, x: torch.Tensor, rank: int, repeat: int = 50) -> dict[str, float]:
    """Median microseconds of the work accel's call adds around its schedule's step: the input
    check (on the first process) and the broadcast of the batch size (every process)."""
    import torch.distributed as dist
    from accel_collectives import broadcast
    from accel_pipeline._inputs import check_call

    def median_us(call: Callable[[], Any]) -> float:
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            call()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1e6

    check = torch.tensor([median_us(lambda: check_call(model.forward.signature, (x,), {}))])
    dist.broadcast(check, src=0)  # the first process's figure, for the row the last one prints
    dist.barrier()
    sent = median_us(lambda: broadcast(torch.tensor([BATCH]), from_process=0))
    return {"check_us": float(check.item()), "broadcast_us": sent}


def run_interleaved(iters: int, chunks_list: Sequence[int]) -> None:
    """accel, accel's schedule and the hand-written floor, alternated in this launch."""
    import torch.distributed as dist
    from accel import PartialState
    from accel.inference import prepare_pippy
    from torch.distributed.pipelining import ScheduleGPipe, SplitPoint, pipeline

    state = PartialState()
    rank, last = state.process_index, state.num_processes - 1
    x = batch()
    base = build_model()
    with torch.no_grad():
        whole = base(x).logits
    for chunks in chunks_list:
        model = prepare_pippy(copy.deepcopy(base), example_args=(x,), num_chunks=chunks)
        names = list(model.pippy_split_points)
        split = {f"model.{name}": SplitPoint.BEGINNING for name in names}
        pipe = pipeline(
            _Logits(copy.deepcopy(base)), mb_args=(x[: BATCH // chunks],), split_spec=split
        )
        floor_stage = pipe.build_stage(rank, device=torch.device("cpu"))
        floor = ScheduleGPipe(floor_stage, chunks)
        del pipe
        same = _operations(model.pippy_stage.submod) == _operations(floor_stage.submod)
        costs = _wrapper_costs(model, x, rank)
        calls = {
            "accel": lambda m=model: m(x),
            "schedule": _stepper(model.forward.schedule, rank, x),
            "floor": _stepper(floor, rank, x),
        }
        outputs = {side: call() for side, call in calls.items()}
        for _ in range(WARMUP - 1):
            for call in calls.values():
                call()
        times: dict[str, list[float]] = {side: [] for side in SIDES}
        for round_ in range(iters):
            turn = SIDES[round_ % len(SIDES) :] + SIDES[: round_ % len(SIDES)]
            for side in turn:
                dist.barrier()
                start = time.perf_counter()
                calls[side]()
                dist.barrier()
                times[side].append(time.perf_counter() - start)
        same = _all(same)
        if rank == last:
            accel_logits = _logits(outputs["accel"])
            row = {
                "mode": "interleaved",
                "chunks": chunks,
                "times": times,
                "split_points": names,
                "diff_floor": (accel_logits - _logits(outputs["floor"])).abs().max().item(),
                "diff_schedule": (accel_logits - _logits(outputs["schedule"])).abs().max().item(),
                "diff_whole": (accel_logits - whole).abs().max().item(),
                "same_operations": same,
                **costs,
            }
            print(json.dumps(row), flush=True)
        del model, floor, floor_stage, calls, outputs
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
        row = {"mode": "accelerate", "version": accelerate.__version__, "chunks": 2}
        print(json.dumps({**row, "seconds": seconds, "example": example}))


def _rows(cmd: list[str], env: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    proc = subprocess.run(
        cmd, capture_output=True, text=True, env={**os.environ, **env}, timeout=1800, cwd=ROOT
    )
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    return rows, "" if proc.returncode == 0 else proc.stderr


def _last_error(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if "Error" in line and not line.startswith(" ")]
    return lines[0] if lines else stderr.strip().splitlines()[-1] if stderr.strip() else "?"


def drive(iters: int, chunks: Sequence[int], out: Path) -> None:
    me = [sys.executable, str(Path(__file__).resolve())]
    from accel_state.testing import free_port

    def torchrun() -> list[str]:  # a free port per launch: other jobs may hold the default one
        return [
            *(sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"),
            f"--master_port={free_port()}",
        ]

    one_thread = {"OMP_NUM_THREADS": "1"}
    sizes = ["--iters", str(iters), "--layers", str(CONFIG["n_layer"])]
    results, err = _rows([*me, "--mode", "whole", *sizes], one_thread)
    assert results, err
    chunk_flag = ["--chunks", ",".join(map(str, chunks))]
    rows, err = _rows(
        [*torchrun(), *me[1:], "--mode", "interleaved", *sizes, *chunk_flag], one_thread
    )
    assert rows, err
    results += rows
    reference_errors = {}
    for example in ("batch", "chunk"):
        rows, err = _rows(
            [*torchrun(), *me[1:], "--mode", "accelerate", *sizes, "--example", example],
            one_thread,
        )
        if not rows:
            reference_errors[example] = _last_error(err)
        results += rows
    write_table(results, reference_errors, iters, out)


def _ms(values: Sequence[float]) -> str:
    """``median (q1-q3)`` of ``values`` seconds, in ms."""
    s = summary(values)
    return f"{s['median'] * 1e3:.0f} ({s['q1'] * 1e3:.0f}-{s['q3'] * 1e3:.0f})"


def gap(times: dict[str, list[float]]) -> dict[str, Any]:
    """The paired ratio accel / floor of each round: median, quartiles and what they say."""
    ratios = [a / f for a, f in zip(times["accel"], times["floor"])]
    found = summary(ratios)
    if len(ratios) < MIN_ROUNDS:
        verdict = f"too few rounds to tell (fewer than {MIN_ROUNDS})"
    elif found["q1"] > 1:
        verdict = "accel slower, beyond the spread"
    elif found["q3"] < 1:
        verdict = "accel faster, beyond the spread"
    else:
        verdict = "no gap beyond the spread"
    wrapper = [a - s for a, s in zip(times["accel"], times["schedule"])]
    return {**found, "verdict": verdict, "wrapper_ms": statistics.median(wrapper) * 1e3}


def _where_time_goes(interleaved: list[dict[str, Any]]) -> str:
    """What accel adds to the floor's work, and how much of a gap beyond the spread it explains."""
    added = {  # the work accel adds, in % of the floor's median call
        r["chunks"]: (r["check_us"] + r["broadcast_us"])
        / 1e4
        / statistics.median(r["times"]["floor"])
        for r in interleaved
    }
    same = all(r["same_operations"] for r in interleaved)
    text = (
        f"Where the time goes: accel's stages run {'the same' if same else 'DIFFERENT'} "
        "operations as the hand-written ones (the calls of each stage's graphs, counted on "
        "every process), under the same `ScheduleGPipe`. Around the schedule's step, each call "
        f"adds an input check on the first process ({max(r['check_us'] for r in interleaved):.0f}"
        f" µs) and one gloo broadcast of the batch size "
        f"({max(r['broadcast_us'] for r in interleaved):.0f} µs), which every process needs to "
        "know how many steps to run and which lets a bad call raise on every process instead of "
        "hanging; with a batch of one pipeline step the output is returned without a copy. That "
        f"is at most {max(added.values()):.2f}% of the floor's median call."
    )
    slower = [r for r in interleaved if gap(r["times"])["verdict"].startswith("accel slower")]
    for r in slower:
        text += (
            f" At {r['chunks']} chunks accel is slower beyond the spread, by "
            f"{(gap(r['times'])['median'] - 1) * 100:.1f}%; the work it adds accounts for "
            f"{added[r['chunks']]:.2f} points of it, the rest lies between the two schedules' "
            "calls (compare the column of accel's schedule called directly)."
        )
    if not slower:
        text += " No num_chunks shows accel slower than the floor beyond the spread."
    return text


def write_table(
    results: list[dict[str, Any]], reference_errors: dict[str, str], iters: int, out: Path
) -> None:
    """Write this script's section of ``out`` (the rest of the page is kept) and print it."""
    whole1 = next(r["seconds"] for r in results if r["mode"] == "whole" and r["threads"] == 1)
    interleaved = [r for r in results if r["mode"] == "interleaved"]
    lines = [
        f"{platform.machine()}, {os.cpu_count()} cores shared with other work, torch "
        f"{torch.__version__}, gloo. Model: `GPT2ForSequenceClassification` from a config "
        f"({CONFIG['n_layer']} layers, n_embd {CONFIG['n_embd']}, vocab {CONFIG['vocab_size']}), "
        f"batch {BATCH} x {SEQ} tokens, float32, no gradients. Pipelined rows come from ONE "
        "launch of 2 processes x 1 thread that builds accel's `prepare_pippy`, the hand-written "
        "floor and accel's schedule called directly from the same weights and inputs, then "
        f"alternates them: {WARMUP} warm-up calls each, then {iters} timed round(s) of one "
        "call each, the order rotating every round; each call is timed between two barriers. Chunk "
        "size = batch / num_chunks; ms / batch is the median.",
        "",
        "| setup | processes x threads | num_chunks | chunk size | ms / batch | samples / s "
        "| vs whole model, 1 thread |",
        "| --- | --- | ---: | ---: | ---: | ---: | ---: |",
    ]

    def row(setup: str, who: str, chunks: str, size: int, seconds: float) -> None:
        lines.append(
            f"| {setup} | {who} | {chunks} | {size} | {seconds * 1e3:.0f} | "
            f"{BATCH / seconds:.1f} | {whole1 / seconds:.2f}x |"
        )

    for r in results:
        if r["mode"] == "whole":
            row("floor: whole model, plain torch", f"1 x {r['threads']}", "-", BATCH, r["seconds"])
    names = {
        "accel": "accel prepare_pippy",
        "schedule": "accel's schedule, called directly",
        "floor": "floor: torch.distributed.pipelining by hand",
    }
    for side in ("accel", "floor", "schedule"):
        for r in interleaved:
            median = statistics.median(r["times"][side])
            row(names[side], "2 x 1", str(r["chunks"]), BATCH // r["chunks"], median)
    for r in results:
        if r["mode"] == "accelerate":
            who = f"accelerate {r['version']} prepare_pippy ({r['example']} example)"
            row(who, "2 x 1", str(r["chunks"]), BATCH // r["chunks"], r["seconds"])
    for example in reference_errors:
        lines.append(
            f"| accelerate prepare_pippy ({example} example): failed (error below the table) "
            f"| 2 x 1 | 2 | {BATCH // 2} | | | |"
        )
    if interleaved:
        lines += [
            "",
            "### accel against the floor, call by call in one launch",
            "",
            "Each cell: median (interquartile range) over the timed rounds. The paired ratio "
            "divides accel's call by the floor's call of the same round; a range that excludes "
            "1.00 is a gap, not noise. `accel's call - its schedule` is the median time accel "
            "spends around the schedule's step (input checks, the batch-size broadcast, output "
            "merging).",
            "",
            "| num_chunks | accel prepare_pippy (ms) | accel's schedule, called directly (ms) "
            "| raw torch pipelining by hand, the floor (ms) | accel / floor, paired "
            "| accel's call - its schedule (ms) | verdict |",
            "| --- | ---: | ---: | ---: | ---: | ---: | --- |",
        ]
        for r in interleaved:
            found = gap(r["times"])
            lines.append(
                f"| {r['chunks']} chunks of {BATCH // r['chunks']} | {_ms(r['times']['accel'])} "
                f"| {_ms(r['times']['schedule'])} | {_ms(r['times']['floor'])} "
                f"| {found['median']:.3f}x ({found['q1']:.3f}-{found['q3']:.3f}) "
                f"| {found['wrapper_ms']:.2f} | {found['verdict']} |"
            )
        lines += [
            "",
            f"Split point chosen by `split_points='auto'` (the floor cuts at the same one): "
            f"{interleaved[0]['split_points']}; largest difference of accel's logits from the "
            f"floor's: {max(r['diff_floor'] for r in interleaved):.1e}, from its own schedule's: "
            f"{max(r['diff_schedule'] for r in interleaved):.1e}, from the unsplit model: "
            f"{max(r['diff_whole'] for r in interleaved):.1e}.",
            "",
            _where_time_goes(interleaved),
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
    write_section(out, SECTION, TITLE, "\n".join(lines))  # also draws the page's charts
    print("\n".join(lines))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument(
        "--mode", choices=["drive", "whole", "interleaved", "accelerate"], default="drive"
    )
    parser.add_argument("--iters", type=int, default=30, help="timed calls (rounds) per side")
    parser.add_argument(
        "--chunks",
        default=",".join(map(str, CHUNKS)),
        help="comma-separated num_chunks values, each dividing the batch of 16",
    )
    parser.add_argument("--example", choices=["batch", "chunk"], default="batch")
    parser.add_argument("--layers", type=int, default=8, help="GPT-2 blocks (2 or more)")
    parser.add_argument("--out", type=Path, default=ROOT / "benchmarks/results/pipeline.md")
    args = parser.parse_args()
    if args.layers < 2:
        parser.error(
            f"--layers is the number of GPT-2 blocks, cut into 2 stages, so at least 2; got "
            f"{args.layers}. Pass --layers 2 or more."
        )
    CONFIG["n_layer"] = args.layers
    chunks = [int(c) for c in args.chunks.split(",") if c.strip()]
    wrong = [c for c in chunks if c < 1 or BATCH % c]
    if wrong or not chunks:
        parser.error(
            f"--chunks lists num_chunks values that divide the batch of {BATCH}; got "
            f"{args.chunks!r}. Pass e.g. --chunks 1,2,4,8."
        )
    if args.mode == "drive":
        drive(args.iters, chunks, args.out)
    elif args.mode == "accelerate":
        run_accelerate(args.iters, args.example)
    elif args.mode == "interleaved":
        run_interleaved(args.iters, chunks)
    else:
        run_whole(args.iters)


if __name__ == "__main__":
    main()

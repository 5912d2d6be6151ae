"""Median latency of accel_collectives operations vs the reference (accelerate) and the floor.

Run on 2 gloo processes:

    uv run python -m torch.distributed.run --nproc_per_node 2 \
        benchmarks/collectives/bench_collectives.py [--iters 300] [--out PATH]

Each iteration calls every variant of one operation once, in rotating order, so that all
variants see the same machine noise; a variant's latency is the median over iterations of the
slower of the two processes. The raw variant (the floor) is the plain torch.distributed code a user
would write for the same result (e.g. ``reduce`` = copy + all_reduce + divide, so that the input is
left untouched, as ``reduce`` leaves it). Rank 0 writes a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import accel_collectives as ac
import torch
import torch.distributed as dist
from accel_state import PartialState

_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor

SIZES = {"1 KB": 1 << 10, "64 KB": 1 << 16, "1 MB": 1 << 20}


def _load_accelerate() -> Any:
    try:
        import accelerate
        import accelerate.utils as au
    except ImportError:
        return None
    # Our state has already started the gloo group; accelerate's state adopts it.
    accelerate.PartialState(cpu=True)
    return au


# ------------------------------------------------------------------------ raw equivalents
def raw_gather(t: torch.Tensor, n: int) -> torch.Tensor:
    out = t.new_empty((n * t.shape[0], *t.shape[1:]))
    _gather_single(out, t)
    return out


def raw_reduce_mean(t: torch.Tensor, n: int) -> torch.Tensor:
    out = t.clone()
    dist.all_reduce(out)
    return out.div_(n)


def raw_pad(t: torch.Tensor, n: int) -> torch.Tensor:
    size = torch.tensor([t.shape[0]])
    sizes = size.new_empty((n,))
    _gather_single(sizes, size)
    longest = int(sizes.max())
    if longest == t.shape[0]:
        return t
    out = t.new_zeros((longest, *t.shape[1:]))
    out[: t.shape[0]] = t
    return out


def raw_gather_object(obj: Any, n: int) -> list[Any]:
    out: list[Any] = [None] * n
    dist.all_gather_object(out, obj)
    return [x for part in out for x in part]


def raw_broadcast_object_list(objs: list[Any], n: int) -> list[Any]:
    dist.broadcast_object_list(objs, src=0)
    return objs


# ---------------------------------------------------------------------------- measurement
def measure(variants: dict[str, Callable[[], Any]], iters: int, warmup: int = 20) -> dict:
    names = list(variants)
    for _ in range(warmup):
        for name in names:
            variants[name]()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(iters):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            dist.barrier()
            start = time.perf_counter()
            variants[name]()
            times[name].append(time.perf_counter() - start)
    # Latency of one call = the slower process's time.
    per_call: dict[str, list[float]] = {}
    for name in names:
        local = torch.tensor(times[name], dtype=torch.float64)
        dist.all_reduce(local, op=dist.ReduceOp.MAX)
        per_call[name] = local.tolist()
    result = {name: statistics.median(values) for name, values in per_call.items()}
    # Paired ratios: calls of the same iteration ran back to back, under the same load.
    for name in names:
        if name != "raw":
            pairs = zip(per_call[name], per_call["raw"])
            result[f"{name}/raw"] = statistics.median(a / b for a, b in pairs)
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=300)
    parser.add_argument("--only", default="", help="comma-separated operations to run")
    parser.add_argument("--sizes", default=",".join(SIZES), help="comma-separated sizes")
    parser.add_argument(
        "--out",
        default=str(Path(__file__).resolve().parents[1] / "results" / "collectives.md"),
    )
    args = parser.parse_args()

    state = PartialState()
    n, rank = state.num_processes, state.process_index
    au = _load_accelerate()
    rows: list[tuple[str, str, dict[str, float]]] = []

    only = {name.strip() for name in args.only.split(",") if name.strip()}
    for label in args.sizes.split(","):
        nbytes = SIZES[label.strip()]
        numel = nbytes // 4
        t = torch.randn(numel)
        # pad_across_processes: the last process has 1 % fewer rows, so everybody else pads.
        short = torch.randn(numel - (numel // 100 if rank == n - 1 else 0))
        blob = [os.urandom(nbytes)]
        cases: dict[str, dict[str, Callable[[], Any]]] = {
            "gather": {
                "accel": lambda t=t: ac.gather(t),
                "raw": lambda t=t: raw_gather(t, n),
            },
            "reduce (mean)": {
                "accel": lambda t=t: ac.reduce(t),
                "raw": lambda t=t: raw_reduce_mean(t, n),
            },
            "pad_across_processes": {
                "accel": lambda s=short: ac.pad_across_processes(s),
                "raw": lambda s=short: raw_pad(s, n),
            },
            "gather_object": {
                "accel": lambda b=blob: ac.gather_object(b),
                "raw": lambda b=blob: raw_gather_object(b, n),
            },
            "broadcast_object_list": {
                "accel": lambda b=blob: ac.broadcast_object_list(list(b) if rank == 0 else [None]),
                "raw": lambda b=blob: raw_broadcast_object_list(
                    list(b) if rank == 0 else [None], n
                ),
            },
        }
        if au is not None:
            cases["gather"]["accelerate"] = lambda t=t: au.gather(t)
            cases["reduce (mean)"]["accelerate"] = lambda t=t: au.reduce(t)
            cases["pad_across_processes"]["accelerate"] = lambda s=short: au.pad_across_processes(s)
            cases["gather_object"]["accelerate"] = lambda b=blob: au.gather_object(b)
            cases["broadcast_object_list"]["accelerate"] = lambda b=blob: au.broadcast_object_list(
                list(b) if rank == 0 else [None]
            )
        iters = args.iters if nbytes < (1 << 20) else max(50, args.iters // 3)
        for op, variants in cases.items():
            if only and op not in only:
                continue
            rows.append((op, label, measure(variants, iters)))

    if rank == 0:
        write_table(rows, args.out, n, au is not None)
    dist.barrier()


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.0f}"


def write_table(rows: list, out: str, n: int, with_accelerate: bool) -> None:
    head = "| operation | size | floor: raw torch.distributed (us) | accel (us) | accel / floor |"
    sep = "| --- | --- | ---: | ---: | ---: |"
    if with_accelerate:
        head += " accelerate (us) | accelerate / floor |"
        sep += " ---: | ---: |"
    head += " accel / floor, paired |"
    sep += " ---: |"
    if with_accelerate:
        head += " accelerate / floor, paired |"
        sep += " ---: |"
    lines = [
        "# accel-collectives: latency vs the reference and raw torch.distributed",
        "",
        f"{n} gloo processes on one machine ({platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} cores), torch {torch.__version__}. Median over iterations of the "
        "slower process's time per call; variants interleaved in rotating order.",
        "The floor (raw) is the plain torch.distributed code giving the same result: `all_gather_single` "
        "into a preallocated output (gather); copy + `all_reduce` + divide (reduce, whose "
        "input is left unchanged); size all-gather + pad (pad_across_processes, last process "
        "1 % shorter); `all_gather_object` + flatten; `broadcast_object_list`. Object sizes are "
        "the size of one bytes payload per process. The paired columns are the median over "
        "iterations of a library's time divided by the floor's time in the same iteration "
        "(the calls ran back to back), which is less sensitive to load changing during the run "
        "than the ratio of medians; on a shared 2-core machine both move by about +-10 % "
        "between runs.",
        "",
        head,
        sep,
    ]
    for op, label, res in rows:
        line = (
            f"| {op} | {label} | {_us(res['raw'])} | {_us(res['accel'])} | "
            f"{res['accel'] / res['raw']:.2f}x |"
        )
        if with_accelerate:
            line += f" {_us(res['accelerate'])} | {res['accelerate'] / res['raw']:.2f}x |"
        line += f" {res['accel/raw']:.2f}x |"
        if with_accelerate:
            line += f" {res['accelerate/raw']:.2f}x |"
        lines.append(line)
    text = "\n".join(lines) + "\n"
    Path(out).parent.mkdir(parents=True, exist_ok=True)
    Path(out).write_text(text)
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    from _charts import write_charts  # benchmarks/_charts.py

    write_charts(out)  # one PNG per table, shown under it
    print(text)


if __name__ == "__main__":
    main()

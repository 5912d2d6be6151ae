"""Cost of the hang watchdog's record around each collective, on 2 gloo processes.

    uv run python -m torch.distributed.run --nproc_per_node 2 --master_port 29533 \
        benchmarks/collectives/bench_watchdog.py [--iters 400] [--out PATH]

``PartialState`` starts the watchdog thread (it wakes once a second). Each iteration runs a
1 KB all-gather bare and the same all-gather inside ``collective(...)`` (what accel's
operations do), in alternating order; the table gives the medians over iterations of the
slower process, the median of the paired ratio, and the cost of one empty enter/exit measured
alone. Rank 0 writes a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import timeit
from pathlib import Path

import torch
import torch.distributed as dist
from accel_state import PartialState
from accel_state.hang_watchdog import collective

_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _timed(fn, tensor: torch.Tensor, out: torch.Tensor) -> float:
    dist.barrier()
    start = time.perf_counter()
    fn(out, tensor)
    mine = torch.tensor([time.perf_counter() - start])
    everyone = torch.empty(2)
    _gather_single(everyone, mine)
    return float(everyone.max())


def bare(out: torch.Tensor, tensor: torch.Tensor) -> None:
    _gather_single(out, tensor)


def recorded(out: torch.Tensor, tensor: torch.Tensor) -> None:
    with collective("gather", tensor):
        _gather_single(out, tensor)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=400)
    parser.add_argument("--out", default="benchmarks/results/collectives_watchdog.md")
    args = parser.parse_args()
    state = PartialState(cpu=True)
    tensor = torch.ones(256)
    out = tensor.new_empty(512)
    for _ in range(20):
        recorded(out, tensor)
    times: dict[str, list[float]] = {"bare": [], "recorded": []}
    ratios = []
    for i in range(args.iters):
        order = [("bare", bare), ("recorded", recorded)]
        if i % 2:
            order.reverse()
        got = {name: _timed(fn, tensor, out) for name, fn in order}
        for name, value in got.items():
            times[name].append(value)
        ratios.append(got["recorded"] / got["bare"])
    alone = min(timeit.repeat(lambda: recorded_empty(tensor), number=100_000, repeat=5)) / 1e5
    if state.is_main_process:
        med = {k: statistics.median(v) * 1e6 for k, v in times.items()}
        text = (
            "# Hang watchdog: cost per collective\n\n"
            f"2 gloo processes, {platform.machine()}, torch {torch.__version__}, "
            f"{args.iters} iterations, watchdog thread running. All-gather of 1 KB.\n\n"
            "| variant | median (us) |\n| --- | ---: |\n"
            f"| bare all-gather | {med['bare']:,.0f} |\n"
            f"| inside `collective(...)` | {med['recorded']:,.0f} |\n\n"
            f"Median paired ratio recorded / bare: {statistics.median(ratios):.3f}x. "
            f"One empty `collective(...)` enter + exit alone: {alone * 1e6:.2f} us.\n"
        )
        Path(args.out).write_text(text)
        sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        from _charts import write_charts  # benchmarks/_charts.py

        write_charts(args.out)  # one PNG per table, shown under it
        print(text)


def recorded_empty(tensor: torch.Tensor) -> None:
    with collective("gather", tensor):
        pass


if __name__ == "__main__":
    main()

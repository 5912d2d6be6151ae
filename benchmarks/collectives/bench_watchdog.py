"""Cost of the hang watchdog's record around each collective, on 2 gloo processes.

    uv run python -m torch.distributed.run --nproc_per_node 2 --master_port 29533 \
        benchmarks/collectives/bench_watchdog.py [--iters 400] [--out PATH]

``PartialState`` starts the watchdog thread (it wakes once a second). Each iteration runs a
1 KB all-gather bare (the floor), the same all-gather inside ``collective(...)`` (what accel's
operations do), accel's ``gather``, and, when the reference library is installed, its
``gather``: it has no watchdog (a hang surfaces only at the process group's timeout), so its
users get plain calls, or turn on its debug mode, whose check of every process's shapes before
each operation is its diagnostic for mismatched collectives. The variants run in rotating
order; the table gives the medians over iterations of the slower process, the median of the
paired ratio to the floor, and the cost of one empty enter/exit measured alone. Rank 0 writes
a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import timeit
from collections.abc import Callable
from pathlib import Path
from typing import Any

import accel_collectives as ac
import torch
import torch.distributed as dist
from accel_state import PartialState
from accel_state.hang_watchdog import collective

_gather_single = getattr(dist, "all_gather_single", None) or dist.all_gather_into_tensor


def _timed(fn: Callable[[], Any]) -> float:
    dist.barrier()
    start = time.perf_counter()
    fn()
    mine = torch.tensor([time.perf_counter() - start])
    everyone = torch.empty(2)
    _gather_single(everyone, mine)
    return float(everyone.max())


def bare(out: torch.Tensor, tensor: torch.Tensor) -> None:
    _gather_single(out, tensor)


def recorded(out: torch.Tensor, tensor: torch.Tensor) -> None:
    with collective("gather", tensor):
        _gather_single(out, tensor)


def _variants(tensor: torch.Tensor, out: torch.Tensor) -> dict[str, Callable[[], Any]]:
    """Label -> one 1 KB all-gather; the first is the floor."""
    variants: dict[str, Callable[[], Any]] = {
        "floor: bare `all_gather_into_tensor`": lambda: bare(out, tensor),
        "accel: the same inside `collective(...)`": lambda: recorded(out, tensor),
        "accel: `gather` (records through `collective`)": lambda: ac.gather(tensor),
    }
    try:
        import accelerate
        import accelerate.utils as au
    except ImportError:
        return variants
    ref = accelerate.PartialState(cpu=True)  # adopts the gloo group already started

    def debug_gather() -> None:
        ref.debug = True  # what ACCELERATE_DEBUG_MODE=1 sets
        try:
            au.gather(tensor)
        finally:
            ref.debug = False

    variants["accelerate: `gather` (no watchdog: a hang waits for the group timeout)"] = lambda: (
        au.gather(tensor)
    )
    variants["accelerate: `gather`, debug mode (checks shapes first)"] = debug_gather
    return variants


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--iters", type=int, default=400)
    parser.add_argument("--out", default="benchmarks/results/collectives_watchdog.md")
    args = parser.parse_args()
    state = PartialState(cpu=True)
    tensor = torch.ones(256)
    out = tensor.new_empty(512)
    variants = _variants(tensor, out)
    names = list(variants)
    floor = names[0]
    for _ in range(20):
        for fn in variants.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in names}
    for i in range(args.iters):
        order = names[i % len(names) :] + names[: i % len(names)]
        for name in order:
            times[name].append(_timed(variants[name]))
    alone = min(timeit.repeat(lambda: recorded_empty(tensor), number=100_000, repeat=5)) / 1e5
    if state.is_main_process:
        rows = []
        for name in names:
            med = statistics.median(times[name]) * 1e6
            paired = statistics.median(a / b for a, b in zip(times[name], times[floor]))
            rows.append(f"| {name} | {med:,.0f} | {paired:.3f}x |")
        text = (
            "# Hang watchdog: cost per collective\n\n"
            f"2 gloo processes, {platform.machine()}, torch {torch.__version__}, "
            f"{args.iters} iterations, watchdog thread running. All-gather of 1 KB; variants "
            "in rotating order; ratio = median over iterations of the variant's time / the "
            "floor's time in the same iteration.\n\n"
            "| variant | median (us) | paired ratio to floor |\n| --- | ---: | ---: |\n"
            + "\n".join(rows)
            + f"\n\nOne empty `collective(...)` enter + exit alone: {alone * 1e6:.2f} us.\n"
        )
        Path(args.out).parent.mkdir(parents=True, exist_ok=True)
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

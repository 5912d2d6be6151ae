"""The chaos soak at full length: many seeded faults, each run compared bit for bit with an
uninterrupted one.

    uv run --no-sync python benchmarks/fault_tolerance/bench_chaos.py [--runs 100] [--seed 0]
        [--budget-minutes M] [--out PATH]

Runs ``tools/chaos.py`` (see its docstring for the faults, the recovery and the checks): an
uninterrupted baseline, then ``--runs`` runs of seeds ``--seed``, ``--seed + 1``, ... (the
fault kind cycles with the seed, its moment is drawn from it), each a 2-process
``accel-launch --max_restarts 2`` job. ``--budget-minutes`` stops starting runs after that
long (the page then says how many ran). Writes a section of counts per fault kind into the
fault-tolerance results page and exits with 1 when a run did not end identical.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "benchmarks"))

from _machine import load_average, machine, write_section  # noqa: E402  (benchmarks/)


def _chaos():  # tools/chaos.py, loaded by path (tools/ is no package)
    spec = importlib.util.spec_from_file_location("chaos", ROOT / "tools" / "chaos.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["chaos"] = module
    spec.loader.exec_module(module)
    return module


def body(chaos, results, runs: int, base_seconds: float, wall: float, load: tuple) -> str:
    """The section: counts per fault kind, then every run that was not identical."""
    lines = [
        "## Chaos soak: runs hit by faults, compared with an uninterrupted run",
        "",
        f"`python benchmarks/fault_tolerance/bench_chaos.py --runs {runs}`: {len(results)} of "
        f"{runs} seeded runs done in {wall / 60:.0f} min ({machine()}, load average "
        f"{load[0]:.1f} at start, {load[1]:.1f} at end). Each run is "
        "`accel-launch --cpu --num_processes 2 --max_restarts 2` of "
        "`tests/scripts/chaos_training.py` (12 steps, a checkpoint every 2 to 4 steps, "
        "synchronous or asynchronous saves, `total_limit` none or 2, all drawn from the seed), "
        "hit by one fault at a moment drawn from the seed (`tools/chaos.py`). Identical means: "
        "final weights, momentum buffers and counters `torch.equal` to the uninterrupted run's, "
        "the same samples at every step, no `.partial` / `.replaced` folder left, no process "
        f"left running. The uninterrupted run took {base_seconds:.0f} s.",
        "",
        "| fault | runs | identical | not identical | fault hit | stray folders | "
        "launches | mean wall time (s) |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for kind in chaos.KINDS:
        mine = [r for r in results if r.fault.kind == kind and not r.skipped]
        if not mine:
            continue
        same = sum(r.identical for r in mine)
        hit = sum(chaos.hit(r) for r in mine)
        stray = sum(len(r.strays) for r in mine)
        launches = sum(r.launches for r in mine)
        mean = sum(r.seconds for r in mine) / len(mine)
        lines.append(
            f"| {kind} | {len(mine)} | {same} | {len(mine) - same} | {hit} | {stray} | "
            f"{launches} | {mean:.0f} |"
        )
    done = [r for r in results if not r.skipped]
    total_same = sum(r.identical for r in done)
    lines += [
        f"| **all** | {len(done)} | {total_same} | {len(done) - total_same} | "
        f"{sum(chaos.hit(r) for r in done)} | {sum(len(r.strays) for r in done)} | "
        f"{sum(r.launches for r in done)} | {sum(r.seconds for r in done) / max(1, len(done)):.0f} |",
        "",
        "Fault kinds:",
        "",
        *[f"- `{kind}`: {text}." for kind, text in chaos.KINDS.items()],
    ]
    skipped = Counter(r.skipped for r in results if r.skipped)
    for reason, count in skipped.items():
        lines += ["", f"Skipped {count} run(s): {reason}."]
    moments = Counter(
        "missed" if any("missed" in h for h in r.hits) else "hit"
        for r in done
        if r.fault.kind in ("sync-save-kill", "async-write-kill")
    )
    if moments:
        lines += [
            "",
            f"Kills inside a save: {moments['hit']} hit while the save was writing; "
            f"{moments['missed']} came right after it returned (the watching thread missed "
            "the moment) and count as a kill after the save.",
        ]
    bad = [r for r in done if not r.identical]
    if bad:
        lines += ["", "Runs not identical:", ""] + [f"- {chaos.report(r)}" for r in bad]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-minutes", type=float, default=None)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/fault_tolerance.md"))
    args = parser.parse_args()
    chaos = _chaos()
    load_start = load_average()
    start = time.perf_counter()
    budget = None if args.budget_minutes is None else args.budget_minutes * 60
    results, base_seconds = chaos.soak(
        list(range(args.seed, args.seed + args.runs)),
        on_result=lambda r: print(chaos.report(r), flush=True),
        budget=budget,
    )
    wall = time.perf_counter() - start
    text = body(chaos, results, args.runs, base_seconds, wall, (load_start, load_average()))
    write_section(args.out, "bench_chaos", "Fault tolerance", text)
    print(text)
    if any(not r.identical and not r.skipped for r in results):
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

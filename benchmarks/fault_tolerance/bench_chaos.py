"""The chaos soak at full length: many seeded faults, each run compared bit for bit with an
uninterrupted one.

    uv run --no-sync python benchmarks/fault_tolerance/bench_chaos.py [--runs 100] [--seed 0]
        [--budget-minutes M] [--out PATH] [--record PATH]

Runs ``tools/chaos.py`` (see its docstring for the faults, the recovery and the checks): an
uninterrupted baseline, then ``--runs`` runs of seeds ``--seed``, ``--seed + 1``, ... (the
fault kind cycles with the seed, its moment is drawn from it), each a 2-process
``accel-launch --max_restarts 2`` job. ``--budget-minutes`` stops starting runs after that
long (the page then says how many ran). ``--record`` keeps one JSON line per finished run
(with the commit it ran on): a soak stopped part way goes on from there when started again
with the same file, and the page counts every recorded run of the seeds asked for. Writes a section of counts per fault kind into the
fault-tolerance results page and exits with 1 when a run did not end identical.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import subprocess
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


def body(
    chaos, results, runs: int, base_seconds: float, wall: float, load: tuple, where: str = ""
) -> str:
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
        f"left running. The uninterrupted run took {base_seconds:.0f} s.{where}",
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


def _commit() -> str:
    done = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True
    )
    return done.stdout.strip() or "unknown"


def recorded(chaos, path: Path | None) -> dict[int, object]:
    """The runs already in the record file, by seed."""
    if path is None or not path.exists():
        return {}
    runs = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            fault = chaos.Fault(**item.pop("fault"))
            item.pop("commit", None)
            runs[fault.seed] = chaos.Result(fault=fault, **item)
    return runs


def record(path: Path | None, result, commit: str) -> None:
    """Append one finished run to the record file."""
    if path is None or result.skipped:
        return
    item = {**dataclasses.asdict(result), "commit": commit}
    with path.open("a", encoding="utf-8") as file:
        file.write(json.dumps(item) + "\n")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--budget-minutes", type=float, default=None)
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/fault_tolerance.md"))
    parser.add_argument("--record", type=Path, default=None)
    args = parser.parse_args()
    chaos = _chaos()
    commit = _commit()
    seeds = list(range(args.seed, args.seed + args.runs))
    before = {s: r for s, r in recorded(chaos, args.record).items() if s in seeds}
    if before:
        print(f"{len(before)} run(s) already recorded in {args.record}", flush=True)
    load_start = load_average()
    start = time.perf_counter()
    budget = None if args.budget_minutes is None else args.budget_minutes * 60

    def on_result(result) -> None:
        print(chaos.report(result), flush=True)
        record(args.record, result, commit)

    results, base_seconds = chaos.soak(
        [s for s in seeds if s not in before], on_result=on_result, budget=budget
    )
    results = sorted([*before.values(), *results], key=lambda r: r.fault.seed)
    wall = time.perf_counter() - start + sum(r.seconds for r in before.values())
    where = ""
    if args.record is not None:
        shown = args.record.resolve()
        shown = shown.relative_to(ROOT) if shown.is_relative_to(ROOT) else shown
        where = (
            f" Every run, with the commit it ran on: `{shown.as_posix()}` (one JSON line a run)."
        )
    text = body(chaos, results, args.runs, base_seconds, wall, (load_start, load_average()), where)
    write_section(args.out, "bench_chaos", "Fault tolerance", text)
    print(text)
    if any(not r.identical and not r.skipped for r in results):
        sys.exit(1)


if __name__ == "__main__":
    os.environ.setdefault("PYTHONUNBUFFERED", "1")
    main()

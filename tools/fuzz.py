"""Fuzz every reader of bytes from outside the process (files, environment, command line).

Usage:
    python tools/fuzz.py --short                 every target a few seconds (CI)
    python tools/fuzz.py --long --record         1,000,000 inputs or one hour per target,
                                                 written to benchmarks/results/fuzz.md
    python tools/fuzz.py --long --record --targets safetensors,environment
                                                 the same campaign in pieces: each piece
                                                 merges its rows into the section; a target
                                                 whose row reached the goal is skipped
    python tools/fuzz.py --targets safetensors,environment --seconds 60 --inputs 100000
    python tools/fuzz.py --list                  the targets

Coverage-guided with atheris where it is installed (`uv sync --group fuzz`), else a random
structure-aware engine. Corpora and findings go under .fuzz-cache/ (ignored by git) and stay
there between runs; `--keep` copies new findings into tests/fuzz_regressions/, which
tests/test_fuzz_targets.py replays. With `--record`, a target that a stopped piece left short
of its goal goes on counting from where it stopped (`--force`: from zero).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PAGE = ROOT / "benchmarks" / "results" / "fuzz.md"
sys.path.insert(0, str(ROOT / "tools"))


def parse(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--short", action="store_true", help="every target a few seconds (CI)")
    p.add_argument("--long", action="store_true", help="1,000,000 inputs or 1 hour per target")
    p.add_argument("--targets", help="comma-separated names (default: all)")
    p.add_argument("--inputs", type=int, help="inputs per target")
    p.add_argument("--seconds", type=float, help="seconds per target")
    p.add_argument("--timeout", type=float, default=5.0, help="wall time per input (s)")
    p.add_argument("--memory-mb", type=int, default=2048, help="address space over the start")
    p.add_argument("--engine", choices=("auto", "atheris", "random", "replay"), default="auto")
    p.add_argument("--src", type=Path, help="fuzz the packages of another tree (old commit)")
    p.add_argument("--cache", type=Path, help="corpora and findings (default .fuzz-cache/)")
    p.add_argument("--record", action="store_true", help="write benchmarks/results/fuzz.md")
    p.add_argument("--page", type=Path, default=PAGE, help="results page of --record")
    p.add_argument(
        "--force", action="store_true", help="with --record: run targets that reached the goal"
    )
    p.add_argument("--label", help="section of the results page (default: short / long)")
    p.add_argument("--note", default="", help="text under the section's title")
    p.add_argument("--keep", action="store_true", help="copy findings to tests/fuzz_regressions")
    p.add_argument("--list", action="store_true", help="list the targets")
    p.add_argument(
        "--collect", action="store_true", help="report what the cache holds, run nothing"
    )
    p.add_argument("--seed", type=int, default=0, help="random engine's seed")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    p.add_argument("--max-len", type=int, default=1 << 16, help=argparse.SUPPRESS)
    return p.parse_args(argv)


def main(argv: list[str]) -> int:
    options = parse(argv)
    if options.worker:
        from fuzzing import worker

        worker.main(options)
        return 0
    from fuzzing import registry, report, runner, worker

    targets = registry.load_all()
    if options.list:
        for t in targets.values():
            print(f"{t.name:22} {t.reads}")
        return 0
    names = options.targets.split(",") if options.targets else list(targets)
    unknown = sorted(set(names) - set(targets))
    if unknown:
        print(f"unknown targets {unknown}; choose among {sorted(targets)}", file=sys.stderr)
        return 2
    long = options.long
    engine = options.engine
    if engine == "auto":
        engine = "atheris" if long and worker.have_atheris() else "random"
    label = options.label or ("long" if long else "short")
    plan = runner.Plan(
        targets=names,
        engine=engine,
        inputs=options.inputs or (1_000_000 if long else 10_000_000),
        seconds=options.seconds or (3600.0 if long else 3.0),
        timeout=options.timeout,
        memory_mb=options.memory_mb,
        out=(options.cache or ROOT / ".fuzz-cache" / label.split()[0]).resolve(),
        src=options.src,
        seed=options.seed,
        resume=options.record and not options.force,
    )
    if plan.resume and not options.collect:  # a piece of a campaign: what is left of it
        for name, goal in report.done(options.page, label, plan.goal).items():
            if name in plan.targets:
                print(f"{name:22} skipped: its row in {label!r} reached {goal} (--force reruns)")
                plan.targets.remove(name)
        if not plan.targets:
            return 0
    start = time.monotonic()
    results = runner.collect(plan) if options.collect else runner.campaign(plan)
    failed = 0
    for name, stats in results.items():
        found = stats.get("findings", {})
        failed += sum(1 for f in found.values() if not registry.known(f["where"]))
        print(
            f"{name:22} {stats.get('inputs', 0):>9,} inputs {stats.get('seconds', 0):>7.1f} s "
            f"{stats.get('lines', '-'):>5} lines  {len(found)} findings"
        )
        for sig, f in found.items():
            tag = " (known)" if registry.known(f["where"]) else ""
            print(f"    {sig}{tag}: {f['kind']} at {f['where']}: {f['message'][:120]}")
            if options.keep and not tag:
                dest = ROOT / "tests" / "fuzz_regressions" / name
                dest.mkdir(parents=True, exist_ok=True)
                src = plan.out / "findings" / name / f"{sig}.bin"
                if src.exists():
                    shutil.copy(src, dest / f"{sig}.bin")
    print(f"{len(results)} targets, {failed} new findings, {time.monotonic() - start:.0f} s")
    if options.record:
        command = "python tools/fuzz.py " + shlex.join(argv).replace(f"{ROOT}/", "")
        report.record(options.page, label, command, options.note, results)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

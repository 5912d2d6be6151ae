"""Run every benchmark: one command for all the figures of ``benchmarks/results/``.

    uv run --group bench python benchmarks/run.py --full   [--only NAMES] [--out DIR]
    uv run --group bench python benchmarks/run.py --short  [--only NAMES] [--out DIR]
    uv run --group bench python benchmarks/run.py --list

``--full`` runs each benchmark at the sizes of the committed results and writes its page in
``benchmarks/results/`` (or ``--out DIR``). ``--short`` runs each at tiny sizes (seconds each)
and writes the pages into a temporary folder (or ``--out DIR``), never over the committed
results: a smoke test that every benchmark still runs. Benchmarks too slow even when small are
full-only and listed as skipped in short mode; those needing the reference library or DeepSpeed
are skipped with the reason when it is not installed.

Each benchmark runs in a fresh subprocess (its own process group) under a timeout; the runner
prints one line per benchmark (ok, failed with the last error line, skipped with the reason),
stamps every page it produced with a ``Run `name`:`` line (date, duration, machine, versions,
load average at start and end) and exits with 1 when any benchmark failed.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import shlex
import signal
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))

from _machine import kept_blocks, load_average, restore_kept, run_line, stamp  # noqa: E402  (benchmarks/, beside this file)
from _registry import BENCHMARKS, SHORT_TIMEOUT, Benchmark  # noqa: E402


@dataclass
class Outcome:
    """What became of one benchmark."""

    status: str
    """``ok``, ``failed`` or ``skipped``."""
    detail: str
    """The page written, the last error line, or the reason for the skip."""
    seconds: float = 0.0


def _installed(module: str) -> bool:
    return importlib.util.find_spec(module) is not None


def skip_reason(
    benchmark: Benchmark, short: bool, custom_out: bool = False, named: bool = False
) -> str:
    """Why ``benchmark`` does not run in this mode on this machine ("" when it runs).

    ``custom_out``: the pages go to a folder given with ``--out``; ``named``: ``--only`` names
    the benchmark (a short run then includes it even when it is too slow for the smoke test).
    """
    if short and benchmark.short is None:
        return f"full mode only: {benchmark.full_only}"
    if short and benchmark.full_only and not named:
        return f"full mode only in a short run of all (name it with --only): {benchmark.full_only}"
    if benchmark.reference and not _installed("accelerate"):
        return "needs the reference library: uv sync --all-packages --group bench"
    if benchmark.deepspeed and not _installed("deepspeed"):
        return "needs DeepSpeed: uv sync --all-packages (the dev group holds it)"
    if benchmark.out_flag is None and custom_out:
        return "writes only its committed page (no output flag): run it without --out"
    return ""


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def command(benchmark: Benchmark, short: bool, page: Path) -> list[str]:
    """The command line of ``benchmark`` in the chosen mode, writing ``page``."""
    script = str(HERE / benchmark.script)
    arguments = list(benchmark.short or ()) if short else list(benchmark.full)
    if benchmark.out_flag is not None:
        arguments += [benchmark.out_flag, str(page)]
    if benchmark.torchrun:
        launcher = [
            "-m",
            "torch.distributed.run",
            f"--nproc_per_node={benchmark.processes}",
            "--master_addr=127.0.0.1",
            f"--master_port={_free_port()}",
        ]
        return [sys.executable, *launcher, script, *arguments]
    return [sys.executable, script, *arguments]


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid`` (torchrun starts its workers in sessions of their own, so
    killing the benchmark's process group alone would leave them running)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # the process ended meanwhile
        children.setdefault(int(fields[1]), []).append(int(entry.name))
    found, pending = [], [pid]
    while pending:
        for child in children.get(pending.pop(), []):
            found.append(child)
            pending.append(child)
    return found


def _kill_tree(pid: int) -> None:
    """SIGKILL ``pid``'s process group and every process below it."""
    below = _descendants(pid) if Path("/proc").is_dir() else []
    try:
        os.killpg(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    for child in below:
        try:
            os.kill(child, signal.SIGKILL)
        except ProcessLookupError:
            pass


def _last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for line in reversed(lines):
        if "Error" in line or "error" in line or "Exception" in line:
            return line[:300]
    return lines[-1][:300] if lines else "(no output)"


def run_one(
    benchmark: Benchmark,
    short: bool,
    out: Path,
    timeout: float | None = None,
    logs: Path | None = None,
) -> Outcome:
    """Run ``benchmark`` in a fresh subprocess and stamp the page it wrote.

    A failure leaves the benchmark's whole output in ``logs`` (default: the temporary folder).
    """
    page = out / benchmark.page
    argv = command(benchmark, short, page)
    before = page.stat().st_mtime if page.exists() else None
    kept = kept_blocks(page)
    if timeout is None:
        timeout = SHORT_TIMEOUT if short else benchmark.timeout
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    env.setdefault(
        "TORCH_EXTENSIONS_DIR", str(Path.home() / ".cache" / "accel" / "torch_extensions")
    )
    load_start, start = load_average(), time.perf_counter()
    with tempfile.TemporaryFile(mode="w+") as log:
        process = subprocess.Popen(
            argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True
        )
        try:
            code = process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_tree(process.pid)
            process.wait()
            code = None
        log.seek(0)
        output = log.read()
    seconds = time.perf_counter() - start
    if code == 0 and page.exists() and page.stat().st_mtime != before:
        restore_kept(page, kept)
        return _stamped(benchmark, argv, page, seconds, load_start)
    log_file = (logs or Path(tempfile.gettempdir())) / f"accel-bench-{benchmark.name}.log"
    log_file.write_text(output, encoding="utf-8")
    if code is None:
        why = f"stopped after the {timeout:.0f} s timeout"
    elif code != 0:
        why = f"exit {code}: {_last_error(output)}"
    else:
        why = f"exit 0 but {page} was not written"
    return Outcome("failed", f"{why} (output: {_relative(str(log_file))})", seconds)


def _stamped(
    benchmark: Benchmark, argv: list[str], page: Path, seconds: float, load_start: float
) -> Outcome:
    """Stamp the page ``benchmark`` wrote with its ``Run`` line."""
    shown = " ".join(shlex.quote(_relative(part)) for part in argv[1:])
    line = run_line(
        benchmark.name,
        f"python {shown}",
        seconds,
        load_start,
        load_average(),
        ("deepspeed",) if benchmark.deepspeed else (),
    )
    stamp(page, benchmark.name, line)
    return Outcome("ok", _relative(str(page)), seconds)


def _relative(part: str) -> str:
    """``part`` relative to the repository when it is a path inside it."""
    prefix = f"{ROOT}{os.sep}"
    return part[len(prefix) :] if part.startswith(prefix) else part


def list_registry() -> None:
    """Print every benchmark: what it needs, its short arguments or why it is full-only."""
    print(f"{'name':<17} {'script':<40} {'page':<26} needs / short arguments")
    for benchmark in BENCHMARKS:
        needs = [f"{benchmark.processes} processes"] if benchmark.processes > 1 else []
        needs += ["reference"] if benchmark.reference else []
        needs += ["DeepSpeed"] if benchmark.deepspeed else []
        if benchmark.short is None:
            short = f"full mode only ({benchmark.full_only})"
        else:
            short = "short: " + (" ".join(benchmark.short) or "(defaults)")
            if benchmark.full_only:
                short += f" (only with --only: {benchmark.full_only})"
        print(
            f"{benchmark.name:<17} {benchmark.script:<40} {benchmark.page:<26} "
            f"{', '.join(needs) or '-'}; {short}"
        )


def _select(only: str) -> list[Benchmark]:
    if not only:
        return list(BENCHMARKS)
    known = {benchmark.name for benchmark in BENCHMARKS}
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in known]
    if unknown:
        raise SystemExit(
            f"--only names benchmarks of the registry; {', '.join(unknown)} is not one. "
            f"Known: {', '.join(sorted(known))} (see --list)."
        )
    return [benchmark for benchmark in BENCHMARKS if benchmark.name in wanted]


def main(argv: list[str] | None = None) -> int:
    """Parse the command line, run the chosen benchmarks, print the summary."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--short", action="store_true", help="tiny sizes, pages in a temp folder")
    mode.add_argument("--full", action="store_true", help="committed sizes and pages")
    mode.add_argument("--list", action="store_true", help="print the registry and exit")
    parser.add_argument("--only", default="", help="comma-separated benchmark names")
    parser.add_argument("--out", type=Path, default=None, help="folder of the pages written")
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help=f"seconds each benchmark may take (default: {SHORT_TIMEOUT:.0f} in short mode, "
        "its registry timeout in full mode)",
    )
    args = parser.parse_args(argv)
    if args.list:
        list_registry()
        return 0
    if not (args.short or args.full):
        parser.error("choose --short (smoke test, temporary pages) or --full (committed pages)")
    selected = _select(args.only)
    if args.out is not None:
        out = args.out.resolve()
    elif args.short:
        out = Path(tempfile.mkdtemp(prefix="accel-bench-short-"))
    else:
        out = RESULTS
    out.mkdir(parents=True, exist_ok=True)
    mode_name = "short" if args.short else "full"
    print(f"{len(selected)} benchmarks, {mode_name} mode, pages in {out}", flush=True)
    outcomes: dict[str, Outcome] = {}
    began = time.perf_counter()
    for benchmark in selected:
        reason = skip_reason(benchmark, args.short, args.out is not None, bool(args.only))
        if reason:
            outcome = Outcome("skipped", reason)
        else:
            outcome = run_one(benchmark, args.short, out, args.timeout)
        outcomes[benchmark.name] = outcome
        timing = f"{outcome.seconds:6.1f} s" if outcome.status != "skipped" else " " * 8
        print(f"{outcome.status:<8} {benchmark.name:<17} {timing}  {outcome.detail}", flush=True)
    failed = [name for name, outcome in outcomes.items() if outcome.status == "failed"]
    counts = {status: 0 for status in ("ok", "failed", "skipped")}
    for outcome in outcomes.values():
        counts[outcome.status] += 1
    total = time.perf_counter() - began
    summary = ", ".join(f"{count} {status}" for status, count in counts.items())
    print(f"{summary} in {total:.0f} s" + (f"; failed: {', '.join(failed)}" if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

"""A seeded chaos soak of restartable training: faults at random moments, then proof that
nothing was lost.

    uv run --no-sync python tools/chaos.py [--runs 12] [--seed 0] [--kinds KIND,...] [--keep]

Each run starts ``tests/scripts/chaos_training.py`` (12 steps over 2 epochs, a checkpoint
every 2 to 4 steps, synchronous or asynchronous saves) through ``accel-launch --cpu
--num_processes 2 --max_restarts 2`` and hits it with one fault, chosen with its moment from the
run's seed (see :data:`KINDS`). The run then must end with the final weights, the optimizer's
momentum buffers and the counters equal (``torch.equal``) to an uninterrupted run's, every step
trained on the same samples as in that run, no ``.partial`` or ``.replaced`` folder left in
the project, and no process of the job left running.

What a user does after each fault is what the injector does: nothing when the launcher's
restarts recover; after the launcher is stopped (SIGTERM), start the same command again; after
a full disk stops the job (its restarts meet the same full disk), free space and start the same
command again.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tests" / "scripts" / "chaos_training.py"
STEPS = 12
"""Training steps of the script (2 epochs of 6)."""
RESTARTS = 2
"""``--max_restarts`` of every launch (a kill during ``load_state`` needs two)."""
DISK = "2m"
"""Size of the tmpfs of a disk-full run: room for every checkpoint, until it is filled."""
PAGE = 4096

KINDS = {
    "rank-kill": "SIGKILL of one rank during a step (before the forward, after the backward or "
    "after the update)",
    "launcher-sigterm": "SIGTERM of the launcher at a random moment, then the same command again",
    "sync-save-kill": "SIGKILL of one rank inside a synchronous save (in its pre-hook, or once "
    "the staging folder holds K files)",
    "async-write-kill": "SIGKILL of one rank during an asynchronous save's background write "
    "(while the writer thread runs and the staging folder holds K files)",
    "load-kill": "SIGKILL of one rank, then SIGKILL of one rank inside the restart's load_state "
    "(its pre-hook in phase 1, or phase 2)",
    "disk-full": "the disk of the checkpoints fills up just before a save (tmpfs); the job "
    "stops, space is freed and the same command runs again",
}
"""Fault kinds, in the order seeds cycle through them."""


@dataclass(frozen=True)
class Fault:
    """One run's fault, all drawn from its seed."""

    seed: int
    kind: str
    rank: int
    step: int
    """The step (or the first save at or after it) the fault hits."""
    moment: str
    """Where inside it (see ``tests/scripts/chaos_training.py``); for ``disk-full`` the
    bytes left free; for ``launcher-sigterm`` the milliseconds after the step was logged."""
    every: int
    """A checkpoint every that many steps."""
    async_save: bool
    limit: int | None
    """``total_limit`` of the checkpoints."""

    def env(self) -> dict[str, str]:
        """The training script's environment for this fault."""
        script_kind = {
            "rank-kill": "step",
            "sync-save-kill": "save",
            "async-write-kill": "async",
            "load-kill": "load",
            "disk-full": "disk",
        }.get(self.kind, "none")
        env = {
            "CHAOS_EVERY": str(self.every),
            "CHAOS_ASYNC": "1" if self.async_save else "0",
            "CHAOS_FAULT": f"{script_kind}:{self.rank}:{self.step}:{self.moment}",
        }
        if self.limit is not None:
            env["CHAOS_LIMIT"] = str(self.limit)
        return env

    def describe(self) -> str:
        """One line: the seed, the fault and the run's settings."""
        saves = "async" if self.async_save else "sync"
        limit = f", total_limit {self.limit}" if self.limit else ""
        return (
            f"seed {self.seed}: {self.kind} rank {self.rank} step {self.step} {self.moment} "
            f"(every {self.every}, {saves}{limit})"
        )


def plan(seed: int) -> Fault:
    """The fault of the run of ``seed``: its kind cycles with the seed, the rest is drawn."""
    rng = random.Random(seed)
    kind = list(KINDS)[seed % len(KINDS)]
    every = rng.choice((2, 3, 4))
    async_save = rng.random() < 0.5
    limit = rng.choice((None, None, 2))
    rank = rng.choice((0, 1))
    saves = list(range(every, STEPS + 1, every))
    if kind == "rank-kill":
        step, moment = rng.randrange(STEPS), rng.choice(("forward", "backward", "update"))
    elif kind == "launcher-sigterm":
        step, moment = rng.randrange(STEPS), str(rng.randrange(0, 400))
    elif kind == "sync-save-kill":
        async_save = False
        step, moment = rng.choice(saves), rng.choice(["hook"] + [f"files-{k}" for k in range(8)])
    elif kind == "async-write-kill":
        async_save = True
        step, moment = rng.choice(saves), f"files-{rng.randrange(8)}"
    elif kind == "load-kill":
        step, moment = rng.randrange(every + 1, STEPS), rng.choice(("hook", "restore"))
    else:  # disk-full: fewer bytes left than a checkpoint takes (about 15 pages)
        rank, step, moment = 0, rng.choice(saves), str(PAGE * rng.randrange(12))
    return Fault(seed, kind, rank, step, moment, every, async_save, limit)


@dataclass
class Result:
    """What became of one run."""

    fault: Fault
    problems: list[str] = field(default_factory=list)
    """Every way the run differs from the uninterrupted one (empty: identical)."""
    strays: list[str] = field(default_factory=list)
    """``.partial`` / ``.replaced`` folders left in the project."""
    hits: list[str] = field(default_factory=list)
    """Where the fault hit (the ``chaos:`` lines, the signal sent)."""
    launches: int = 0
    seconds: float = 0.0
    skipped: str = ""

    @property
    def identical(self) -> bool:
        """Whether the run ended exactly as the uninterrupted one, with nothing left over."""
        return not self.problems and not self.strays and not self.skipped


def hit(result: Result) -> bool:
    """Whether the fault hit as planned (a load-kill: both of its kills)."""
    if result.fault.kind == "load-kill":
        return any("load_state" in line for line in result.hits)
    return bool(result.hits)


def _launcher() -> list[str]:
    found = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    return [found, "--cpu", "--num_processes", "2", "--max_restarts", str(RESTARTS)]


def _job_processes(project: Path) -> list[int]:
    """Processes whose command line names ``project`` (the job's, from any launch)."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
            except OSError:
                continue
            if str(project).encode() in cmdline.split(b"\0"):
                found.append(int(entry))
    return found


def launch(
    project: Path, out: Path, env: dict[str, str], sigterm_at: tuple[int, float] | None = None
) -> tuple[int, str, str]:
    """Run the training script once through the launcher.

    Args:
        sigterm_at: ``(step, seconds)``: SIGTERM the launcher that long after a process logged
            that step.

    Returns:
        The exit code, the output and what was done to the launcher ("" when nothing).
    """
    log = out / f"launch_{len(list(out.glob('launch_*.log')))}.log"
    done = ""
    with open(log, "w", encoding="utf-8") as sink:
        proc = subprocess.Popen(
            [*_launcher(), str(SCRIPT), str(project), str(out)],
            env={**os.environ, **env},
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        deadline = time.monotonic() + 900
        while proc.poll() is None and time.monotonic() < deadline:
            if sigterm_at is not None and not done and _logged(out, sigterm_at[0]):
                time.sleep(sigterm_at[1])
                if proc.poll() is None:
                    proc.send_signal(signal.SIGTERM)
                    done = (
                        f"SIGTERM to the launcher {sigterm_at[1]:.3f} s after step {sigterm_at[0]}"
                    )
            time.sleep(0.01)
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            done += "; the launch hung past 900 s and was killed"
    return proc.returncode, log.read_text(encoding="utf-8", errors="replace"), done


def _logged(out: Path, step: int) -> bool:
    for path in out.glob("batches_*.log"):
        for line in path.read_text(encoding="utf-8").splitlines():
            if len(line.split()) > 1 and int(line.split()[1]) >= step:
                return True
    return False


def seen(out: Path) -> dict[tuple[int, int], list[int]]:
    """``(rank, step) -> sample indices`` of the last time each step was trained."""
    steps: dict[tuple[int, int], list[int]] = {}
    for path in sorted(out.glob("batches_*.log")):
        for line in path.read_text(encoding="utf-8").splitlines():
            rank, step, *indices = (int(v) for v in line.split())
            steps[rank, step] = indices
    return steps


def compare(out: Path, baseline: Path) -> list[str]:
    """How the final states and the data order of ``out`` differ from ``baseline``'s."""
    import torch
    from safetensors.torch import load_file

    problems = []
    for name in ("final.safetensors", "final_optimizer.safetensors"):
        if not (out / name).is_file():
            problems.append(f"{name} was not written")
            continue
        got, expected = load_file(out / name), load_file(baseline / name)
        if sorted(got) != sorted(expected):
            problems.append(f"{name} holds {sorted(got)}, expected {sorted(expected)}")
        for key in sorted(set(got) & set(expected)):
            if not torch.equal(got[key], expected[key]):
                problems.append(f"{name}: {key} differs from the uninterrupted run")
    order, expected_order = seen(out), seen(baseline)
    if sorted({step for _, step in order}) != list(range(STEPS)):
        problems.append(f"steps trained: {sorted({s for _, s in order})}")
    wrong = sorted(key for key in expected_order if order.get(key) != expected_order[key])
    if wrong:
        problems.append(f"(rank, step) trained on other samples: {wrong}")
    return problems


def strays(project: Path) -> list[str]:
    """Hidden ``.partial`` / ``.replaced`` folders anywhere under ``project``."""
    return sorted(
        str(path.relative_to(project))
        for path in project.rglob(".*")
        if path.name.endswith((".partial", ".replaced"))
    )


@contextmanager
def small_disk(path: Path, size: str = DISK) -> Iterator[str]:
    """Mount a tmpfs of ``size`` at ``path``; yields "" or why it could not be mounted."""
    path.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        yield f"a tmpfs could not be mounted ({(done.stderr or done.stdout).strip()}; needs root)"
        return
    try:
        yield ""
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, check=False)


def run_baseline(workdir: Path) -> Path:
    """The uninterrupted run (synchronous saves every 3 steps); returns its output folder."""
    project, out = workdir / "project", workdir / "out"
    project.mkdir(parents=True)
    out.mkdir()
    code, output, _ = launch(project, out, {"CHAOS_EVERY": "3"})
    if code != 0 or not (out / "final.safetensors").is_file():
        raise RuntimeError(f"the uninterrupted run failed with exit code {code}:\n{output}")
    return out


def run_fault(fault: Fault, workdir: Path, baseline: Path) -> Result:
    """Run the job with ``fault``, recover as a user would, and compare with ``baseline``."""
    result = Result(fault)
    start = time.perf_counter()
    disk, out = workdir / "disk", workdir / "out"
    out.mkdir(parents=True)
    with small_disk(disk) if fault.kind == "disk-full" else _nothing() as reason:
        if reason:
            result.skipped = reason
            return result
        project = disk / "project"
        project.mkdir(parents=True)
        env = {**fault.env(), "CHAOS_LAUNCH": "0"}
        sigterm = None
        if fault.kind == "launcher-sigterm":
            sigterm = (fault.step, int(fault.moment) / 1000)
        code, output, done = launch(project, out, env, sigterm)
        result.launches = 1
        result.hits = [line for line in output.splitlines() if line.startswith("chaos:")]
        result.hits += [done] if done else []
        if fault.kind in ("launcher-sigterm", "disk-full") and code != 0:
            if fault.kind == "disk-full":
                if "could not write" not in output:
                    result.problems.append("the full disk's error names no file")
                result.strays = [f"after the full disk: {s}" for s in strays(project)]
                (disk / "filler.bin").unlink(missing_ok=True)  # the user frees space
            elif code != 128 + signal.SIGTERM:
                result.problems.append(f"the stopped launcher exited with {code}")
            leftover = _wait_gone(project)
            if leftover:
                result.problems.append(f"processes {leftover} outlived their launcher")
            code, output, _ = launch(project, out, {**env, "CHAOS_LAUNCH": "1"})
            result.launches = 2
        if code != 0:
            result.problems.append(f"the last launch exited with {code}: {output[-2000:]}")
        result.problems += compare(out, baseline)
        result.strays += strays(project)
        leftover = _wait_gone(project)
        if leftover:
            result.problems.append(f"processes {leftover} outlived the job")
    result.seconds = time.perf_counter() - start
    return result


@contextmanager
def _nothing() -> Iterator[str]:
    yield ""


def _wait_gone(project: Path, seconds: float = 30.0) -> list[int]:
    """Wait for the job's processes to end; kill and return those still running."""
    deadline = time.monotonic() + seconds
    while (left := _job_processes(project)) and time.monotonic() < deadline:
        time.sleep(0.1)
    for pid in left:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    return left


def soak(
    seeds: list[int], on_result: object = None, keep: bool = False, budget: float | None = None
) -> tuple[list[Result], float]:
    """Run the baseline, then one run per seed (until ``budget`` seconds have passed).

    Returns:
        The results and the baseline's wall time.
    """
    root = Path(tempfile.mkdtemp(prefix="accel-chaos-"))
    start = time.perf_counter()
    baseline = run_baseline(root / "baseline")
    base_seconds = time.perf_counter() - start
    results = []
    for seed in seeds:
        if budget is not None and time.perf_counter() - start > budget:
            break
        workdir = root / f"seed_{seed}"
        result = run_fault(plan(seed), workdir, baseline)
        results.append(result)
        if callable(on_result):
            on_result(result)
        if result.identical and not keep:
            shutil.rmtree(workdir, ignore_errors=True)
        elif not result.skipped:
            print(f"kept {workdir} for inspection", file=sys.stderr)
    if keep or all(r.identical or r.skipped for r in results):
        shutil.rmtree(root / "baseline", ignore_errors=True)
    return results, base_seconds


def report(result: Result) -> str:
    """One line per run: verdict, fault, where it hit, time."""
    verdict = "SKIPPED" if result.skipped else ("identical" if result.identical else "DIFFERENT")
    where = "; ".join(result.hits) or "the fault did not hit"
    if result.hits and not hit(result):
        where += " (the restart's load_state was not hit)"
    details = "; ".join(result.problems + result.strays + [result.skipped])
    return (
        f"{verdict:9} {result.fault.describe()} | {where} | {result.launches} launch(es), "
        f"{result.seconds:.0f} s" + (f" | {details.strip('; ')}" if details.strip("; ") else "")
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=len(KINDS))
    parser.add_argument("--seed", type=int, default=0, help="seed of the first run")
    parser.add_argument("--keep", action="store_true", help="keep every run's folder")
    args = parser.parse_args(argv)
    results, _ = soak(
        list(range(args.seed, args.seed + args.runs)),
        on_result=lambda r: print(report(r), flush=True),
        keep=args.keep,
    )
    bad = [r for r in results if not r.identical and not r.skipped]
    print(f"{len(results) - len(bad)} of {len(results)} runs identical (skipped counted apart)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())

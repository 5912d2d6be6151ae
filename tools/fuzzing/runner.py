"""The parent of the fuzzing processes: starts one per target (or one for all, with the
fallback engine), restarts it after a hang or a signal (the input it died on is a finding),
and gathers the numbers of each target."""

from __future__ import annotations

import glob
import json
import os
import re
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .verdict import Finding

TOOL = Path(__file__).resolve().parent.parent / "fuzz.py"


@dataclass
class Plan:
    """What to run, and under which limits."""

    targets: list[str]
    engine: str
    inputs: int
    seconds: float
    timeout: float
    memory_mb: int
    out: Path
    src: Path | None = None
    seed: int = 0
    resume: bool = False
    """Go on counting where a target's earlier run of the same goal stopped (its numbers in the
    cache), instead of starting its counts from zero."""

    @property
    def goal(self) -> dict[str, float]:
        return {"inputs": self.inputs, "seconds": self.seconds}


def _env(plan: Plan) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("ACCEL_AS_ACCELERATE", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    env["PYTHONHASHSEED"] = "0"
    paths = [str(TOOL.parent)]
    if plan.src is not None:  # another tree's packages first (an older commit, say)
        paths += sorted(glob.glob(str(plan.src / "packages" / "*" / "src")))
    env["PYTHONPATH"] = os.pathsep.join(paths + [env.get("PYTHONPATH", "")])
    return env


def _worker(plan: Plan, targets: list[str], engine: str, seconds: float, inputs: int) -> list[str]:
    return [
        sys.executable,
        str(TOOL),
        "--worker",
        "--engine",
        engine,
        "--targets",
        ",".join(targets),
        "--out",
        str(plan.out),
        "--inputs",
        str(inputs),
        "--seconds",
        str(seconds),
        "--timeout",
        str(plan.timeout),
        "--memory-mb",
        str(plan.memory_mb),
        "--seed",
        str(plan.seed),
    ]


def _stats(plan: Plan, name: str, suffix: str = "") -> dict[str, Any]:
    path = plan.out / "stats" / f"{name}{suffix}.json"
    return json.loads(path.read_text()) if path.exists() else {}


def _died(plan: Plan, proc: subprocess.CompletedProcess[str], pid_files: set[str]) -> None:
    """Record the input a worker died on (the file it wrote before running it)."""
    for path in (plan.out / "current").glob("*"):
        if path.name in pid_files:
            continue
        raw = path.read_bytes()
        path.unlink()
        name, _, data = raw.partition(b"\n")
        if not name:
            continue
        text = proc.stderr[-4000:]
        kind = "timeout" if "Timeout (" in text or "timeout" in text else f"exit {proc.returncode}"
        if proc.returncode < 0:
            kind = f"signal {-proc.returncode}"
        frames = re.findall(r'File "([^"]+)", line (\d+)', text)
        where = f"{Path(frames[0][0]).name}:{frames[0][1]}" if frames else "?"
        finding = Finding(
            kind.replace(" ", "-"),
            where,
            text.strip().splitlines()[-1:][0][:200] if text.strip() else "",
        )
        folder = plan.out / "findings" / name.decode()
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{finding.signature}.bin").write_bytes(data)
        (folder / f"{finding.signature}.txt").write_text(text)
        crashes = plan.out / "stats" / f"{name.decode()}.crashes.json"
        known = json.loads(crashes.read_text()) if crashes.exists() else {}
        known[finding.signature] = {
            **finding.__dict__,
            "input": None,
            "seconds": None,
            "size": len(data),
        }
        crashes.parent.mkdir(parents=True, exist_ok=True)
        crashes.write_text(json.dumps(known, indent=1))


def _run(
    plan: Plan, targets: list[str], engine: str, seconds: float, inputs: int | None = None
) -> str:
    budget = seconds + 300 + 60 * len(targets)
    try:
        proc = subprocess.run(
            _worker(plan, targets, engine, seconds, plan.inputs if inputs is None else inputs),
            env=_env(plan),
            capture_output=True,
            text=True,
            timeout=budget,
        )
    except subprocess.TimeoutExpired as err:
        return f"worker ran past {budget:.0f} s: {(err.stderr or b'')[-300:]!r}"
    if proc.returncode != 0 and not (engine == "atheris" and "Done " in proc.stderr):
        if engine != "replay":  # the coverage pass re-runs known inputs: no new finding there
            _died(plan, proc, set())
        for path in (plan.out / "current").glob("*"):
            path.unlink()
        return proc.stderr
    if engine == "atheris":
        cov = re.findall(r"cov: (\d+) ft: (\d+)", proc.stderr)
        runs = re.findall(r"stat::number_of_executed_units: (\d+)", proc.stderr)
        extra = {"cov": int(cov[-1][0]) if cov else None, "ft": int(cov[-1][1]) if cov else None}
        if runs:
            extra["libfuzzer_runs"] = int(runs[-1])
        path = plan.out / "stats" / f"{targets[0]}.atheris.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        extra["libfuzzer_runs"] = extra.get("libfuzzer_runs", 0) + old.get("libfuzzer_runs", 0)
        path.write_text(json.dumps(extra))
    for path in (plan.out / "current").glob("*"):
        path.unlink()
    return ""


def campaign(plan: Plan, log: Any = print) -> dict[str, dict[str, Any]]:
    """Run every target of the plan; the numbers of each (inputs, lines, findings ...)."""
    (plan.out / "current").mkdir(parents=True, exist_ok=True)
    start_counts(plan)
    if plan.engine == "random":
        left = list(plan.targets)
        for _ in range(len(left) + 5):  # a restart after each worker death
            if not left:
                break
            start = time.monotonic()
            error = _run(plan, left, "random", plan.seconds)
            if error:
                log(f"  a worker died ({time.monotonic() - start:.0f} s): {error[-200:]}")
            left = [n for n in left if "lines" not in _stats(plan, n)]
    else:
        for name in plan.targets:
            done = _stats(plan, name)  # a resumed target: what its earlier pieces ran
            end = time.monotonic() + plan.seconds - done.get("seconds", 0)
            runs = max(1, plan.inputs - done.get("inputs", 0))
            for _ in range(6):
                left = end - time.monotonic()
                if left < 2:
                    break
                error = _run(plan, [name], "atheris", left, runs)
                if not error:
                    break
                log(f"  {name}: worker died, restarting: {error[-200:]}")
            _run(plan, [name], "replay", plan.seconds)
    return collect(plan)


def reached(stats: dict[str, Any]) -> str | None:
    """The goal a target's numbers reached ("1,000,000 inputs", "1 h"), or ``None``."""
    goal = stats.get("goal")
    if not goal:
        return None
    if stats.get("inputs", 0) >= goal["inputs"]:
        return f"{goal['inputs']:,} inputs"
    seconds = goal["seconds"]
    if (stats.get("seconds") or 0) >= 0.99 * seconds - 2:  # the last restart may stop short
        return f"{seconds / 3600:g} h" if seconds % 3600 == 0 else f"{seconds:g} s"
    return None


def start_counts(plan: Plan) -> None:
    """Clear each target's numbers in the cache, except, when the plan resumes, those of a
    target whose earlier pieces ran towards the same goal without reaching it (the corpus
    and the findings stay in any case)."""
    for name in plan.targets:
        goal_path = plan.out / "stats" / f"{name}.goal.json"
        before = json.loads(goal_path.read_text()) if goal_path.exists() else None
        stats = {**_stats(plan, name), "goal": before}
        if plan.resume and before == plan.goal and stats.get("inputs") and not reached(stats):
            for key in ("lines", "corpus"):  # measured again at the end of this piece
                stats.pop(key, None)
            stats.pop("goal")
            (plan.out / "stats" / f"{name}.json").write_text(json.dumps(stats, indent=1))
            continue
        for suffix in ("", ".lines", ".crashes", ".atheris"):
            (plan.out / "stats" / f"{name}{suffix}.json").unlink(missing_ok=True)
        goal_path.parent.mkdir(parents=True, exist_ok=True)
        goal_path.write_text(json.dumps(plan.goal))


def collect(plan: Plan) -> dict[str, dict[str, Any]]:
    """The numbers the cache holds for each target of the plan that has run (also after an
    interrupted campaign)."""
    results = {}
    for name in plan.targets:
        if not (plan.out / "stats" / f"{name}.json").exists():
            continue
        stats = _stats(plan, name)
        stats.update(_stats(plan, name, ".lines"))
        stats.update(_stats(plan, name, ".atheris"))
        stats.setdefault("findings", {}).update(_stats(plan, name, ".crashes"))
        stats["inputs"] = max(stats.get("inputs", 0), stats.get("libfuzzer_runs", 0))
        goal_path = plan.out / "stats" / f"{name}.goal.json"
        stats["goal"] = json.loads(goal_path.read_text()) if goal_path.exists() else plan.goal
        results[name] = stats
    return results

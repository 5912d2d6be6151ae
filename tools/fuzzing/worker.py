"""The process that fuzzes: prepares targets, runs the engine (atheris, or the random
fallback), and measures the lines of accel's code the corpus reaches."""

from __future__ import annotations

import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from .engine import Session, cap_address_space
from .mutate import mutate
from .registry import Context, Target, load_all
from .verdict import ACCEL_ROOTS, Finding


def have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def _prepare(target: Target, out: Path, timeout_s: float) -> Session:
    ctx = target.prepare(out / "seeds" / target.name)
    session = Session(target, ctx, out, timeout_s)
    for i, seed in enumerate(ctx.seeds):  # the right result: every real save reads
        finding, exc, _ = session.check(seed)
        if exc is not None:
            found = Finding("seed-refused", str(i), f"{type(exc).__name__}: {exc}"[:200])
            session.findings.setdefault(found.signature, {**found.__dict__, "input": 0})
            del finding
    return session


def _corpus_dir(session: Session) -> Path:
    folder = session.out / "corpus" / session.target.name
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def _save(folder: Path, data: bytes) -> None:
    (folder / hashlib.sha1(data).hexdigest()).write_bytes(data)


def fuzz_random(session: Session, inputs: int, seconds: float, seed: int) -> None:
    """The fallback engine: mutations of the corpus, kept when an outcome is new."""
    rng = random.Random(seed)
    # The clock counts fuzzing, not the preparation of every target; a resumed target (or a
    # worker restarted after a death) has the time of its earlier runs left out of its budget.
    session.started = time.monotonic() - session.resumed_s
    corpus = list(session.ctx.seeds)
    folder = _corpus_dir(session)
    deadline = session.started + seconds
    last = 0.0
    while session.inputs < inputs and time.monotonic() < deadline:
        data = rng.choice(corpus)
        for _ in range(rng.choice((1, 1, 2, 3))):
            data = mutate(data, session.ctx.fmt, rng)
        if session.feed(data[:1_000_000]) and len(corpus) < 5000:
            corpus.append(data)
            _save(folder, data)
        if time.monotonic() - last > 1:
            session.write_stats({"engine": "random"})
            last = time.monotonic()
    session.write_stats({"engine": "random"})


def fuzz_atheris(session: Session, inputs: int, seconds: float, max_len: int) -> None:
    """Coverage-guided: libFuzzer's mutations and ours, over the corpus folder. Never returns."""
    import atheris

    folder = _corpus_dir(session)
    seeds = session.out / "seeds" / session.target.name / ".inputs"
    seeds.mkdir(parents=True, exist_ok=True)
    for data in session.ctx.seeds:
        _save(seeds, data)
    fmt = session.ctx.fmt
    last = [0.0]
    ran = [0]

    def one(data: bytes) -> None:
        session.feed(data)
        ran[0] += 1
        # libFuzzer ends the process after its last run without returning here, so the counts
        # are written each second and at that last run (else a short piece loses them).
        if ran[0] >= inputs or time.monotonic() - last[0] > 1:
            session.write_stats({"engine": "atheris"})
            last[0] = time.monotonic()

    def mutator(data: bytes, max_size: int, seed: int) -> bytes:
        rng = random.Random(seed)
        if not data or rng.random() < 0.4:
            return atheris.Mutate(data, max_size)
        return mutate(data, fmt, rng)[:max_size]

    argv = [
        sys.argv[0],
        str(folder),
        str(seeds),
        f"-runs={inputs}",
        f"-max_total_time={int(seconds)}",
        f"-max_len={max_len}",
        "-timeout=600",
        "-rss_limit_mb=0",
        "-print_final_stats=1",
        f"-artifact_prefix={session.out / 'findings' / session.target.name}/libfuzzer-",
    ]
    atheris.Setup(argv, one, custom_mutator=mutator)
    atheris.Fuzz()


def lines_reached(session: Session, files: list[bytes], seconds: float = 60.0) -> int:
    """Lines of accel's own code run by replaying ``files`` (a line tracer), for at most
    ``seconds`` (the seeds first, then the corpus in the order it grew)."""
    seen: set[tuple[str, int]] = set()
    marker = os.sep + "packages" + os.sep

    def local(frame: Any, event: str, arg: Any) -> Any:
        if event == "line":
            seen.add((frame.f_code.co_filename, frame.f_lineno))
        return local

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        return local if marker in frame.f_code.co_filename else None

    deadline = time.monotonic() + seconds
    sys.settrace(tracer)
    try:
        for data in files:
            if time.monotonic() > deadline:
                break
            session.check(data)
    finally:
        sys.settrace(None)
    return len(seen)


def corpus_of(session: Session, limit: int = 3000) -> list[bytes]:
    files = sorted(_corpus_dir(session).iterdir(), key=lambda p: p.stat().st_mtime)[:limit]
    return list(session.ctx.seeds) + [f.read_bytes() for f in files]


def main(options: Any) -> None:
    """Run the targets named in ``options`` in this process (atheris: one target)."""
    out = Path(options.out)
    os.environ["HOME"] = str(out / "home")  # no user config file reaches the readers
    os.environ["HF_HOME"] = str(out / "home" / "hf")
    registry = load_all()
    targets = [registry[name] for name in options.targets.split(",")]
    if options.engine == "atheris":
        import atheris

        with atheris.instrument_imports(include=list(ACCEL_ROOTS)):
            session = _prepare(targets[0], out, options.timeout)
        cap_address_space(options.memory_mb)
        fuzz_atheris(session, options.inputs, options.seconds, options.max_len)
        return
    sessions = [_prepare(t, out, options.timeout) for t in targets]
    cap_address_space(options.memory_mb)
    for session in sessions:
        if options.engine == "replay":  # after atheris: its corpus, replayed under the tracer
            corpus = corpus_of(session)
            spend = max(10.0, min(options.seconds / 4, 120.0))  # a quarter of the fuzzing
            lines = {"lines": lines_reached(session, corpus, spend), "corpus": len(corpus)}
            (out / "stats" / f"{session.target.name}.lines.json").write_text(json.dumps(lines))
            continue
        fuzz_random(session, options.inputs, options.seconds, options.seed)
        corpus = corpus_of(session)
        lines = lines_reached(session, corpus, max(2.0, min(options.seconds, 120)))
        session.write_stats({"engine": "random", "lines": lines, "corpus": len(corpus)})
        session.close()


def prepared(name: str, out: Path, timeout_s: float = 10.0) -> tuple[Session, Context]:
    """A session of target ``name`` for replaying inputs (the regression test)."""
    session = _prepare(load_all()[name], out, timeout_s)
    return session, session.ctx

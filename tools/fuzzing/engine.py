"""Running one target: limits per input, the property check, findings kept and minimized.

One :class:`Session` per target and process. ``feed`` runs one input under the wall-time limit
and judges what escaped. The address-space cap (``RLIMIT_AS``) is set once the target is
prepared, so a runaway allocation fails as a ``MemoryError`` (a finding) and never takes the
machine; a hang inside C code that the in-process timer cannot interrupt is ended by
``faulthandler`` and reported by the parent from the input file this module writes before
every input.
"""

from __future__ import annotations

import faulthandler
import json
import os
import resource
import shutil
import signal
import tempfile
import time
import traceback
from pathlib import Path
from typing import Any

from .registry import Context, Target
from .verdict import Finding, InputTimeout, judge


def cap_address_space(extra_mb: int) -> None:
    """Limit the address space to what the process maps now plus ``extra_mb``."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[0])
    now = pages * os.sysconf("SC_PAGE_SIZE")
    limit = now + extra_mb * 2**20
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _on_alarm(signum: int, frame: Any) -> None:
    raise InputTimeout("the reader ran past the wall time allowed per input")


class Session:
    """The state of one target's run in this process."""

    def __init__(self, target: Target, ctx: Context, out: Path, timeout_s: float) -> None:
        self.target, self.ctx, self.out, self.timeout_s = target, ctx, out, timeout_s
        self.stats_path = out / "stats" / f"{target.name}.json"
        before = json.loads(self.stats_path.read_text()) if self.stats_path.exists() else {}
        self.inputs: int = before.get("inputs", 0)  # a restarted worker goes on counting
        self.resumed_s: float = before.get("seconds", 0)
        self.started = time.monotonic() - self.resumed_s
        self.findings: dict[str, dict[str, Any]] = before.get("findings", {})
        self.slow: int = before.get("slow", 0)  # inputs that timed out once, then ran in time
        self.outcomes: set[str] = set()
        self.findings_dir = out / "findings" / target.name
        self.findings_dir.mkdir(parents=True, exist_ok=True)
        self.scratch_root = Path(tempfile.mkdtemp(prefix=f"fuzz-{target.name}-", dir=_tmp_root()))
        current = out / "current"
        current.mkdir(parents=True, exist_ok=True)
        self._current = os.open(current / f"{os.getpid()}", os.O_RDWR | os.O_CREAT, 0o600)
        self._name = target.name.encode() + b"\n"
        signal.signal(signal.SIGALRM, _on_alarm)

    def check(self, data: bytes) -> tuple[Finding | None, BaseException | None, str]:
        """Run one input; the finding (or ``None``), the exception and an outcome key."""
        scratch = Path(tempfile.mkdtemp(dir=self.scratch_root))
        os.pwrite(self._current, self._name + data, 0)
        os.ftruncate(self._current, len(self._name) + len(data))
        faulthandler.dump_traceback_later(self.timeout_s * 2 + 5, exit=True)
        signal.setitimer(signal.ITIMER_REAL, self.timeout_s)
        try:
            self.target.run(self.ctx, data, scratch)
            return None, None, "ok"
        except BaseException as exc:  # noqa: B036 - every escape is judged
            if isinstance(exc, KeyboardInterrupt):
                raise
            frames = traceback.extract_tb(exc.__traceback__)
            where = f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "?"
            return judge(exc, self.target.allowed), exc, f"{type(exc).__name__}@{where}"
        finally:
            signal.setitimer(signal.ITIMER_REAL, 0)
            faulthandler.cancel_dump_traceback_later()
            shutil.rmtree(scratch, ignore_errors=True)

    def feed(self, data: bytes) -> bool:
        """Run and judge one input; True when it showed an outcome not seen before."""
        self.inputs += 1
        finding, exc, outcome = self.check(data)
        if (
            finding is not None
            and finding.kind == "timeout"
            and finding.signature not in self.findings
        ):
            # A timeout counts when the input runs past the limit twice: on a loaded machine
            # one run of an input that takes milliseconds can be descheduled for seconds.
            again, _, _ = self.check(data)
            if again is None or again.kind != "timeout":
                self.slow += 1
                finding = None
        new = outcome not in self.outcomes
        self.outcomes.add(outcome)
        if finding is not None and finding.signature not in self.findings:
            self._keep(finding, exc, data)
        return new

    def _keep(self, finding: Finding, exc: BaseException | None, data: bytes) -> None:
        if finding.kind != "timeout":
            data = self.minimize(data, finding.signature)
        name = finding.signature
        (self.findings_dir / f"{name}.bin").write_bytes(data)
        text = "".join(traceback.format_exception(exc)) if exc is not None else ""
        (self.findings_dir / f"{name}.txt").write_text(text)
        self.findings[name] = {
            "kind": finding.kind,
            "where": finding.where,
            "message": finding.message,
            "input": self.inputs,
            "seconds": round(time.monotonic() - self.started, 2),
            "size": len(data),
        }

    def minimize(self, data: bytes, signature: str, budget_s: float = 3.0) -> bytes:
        """Drop chunks of ``data`` while the same finding still shows (selector byte kept)."""
        keep = 1 if isinstance(self.ctx.fmt, dict) else 0
        deadline = time.monotonic() + budget_s
        chunk = max(1, (len(data) - keep) // 2)
        while chunk >= 1 and time.monotonic() < deadline:
            at, shrunk = keep, False
            while at < len(data) and time.monotonic() < deadline:
                trial = data[:at] + data[at + chunk :]
                finding, _, _ = self.check(trial)
                if finding is not None and finding.signature == signature:
                    data, shrunk = trial, True
                else:
                    at += chunk
            if not shrunk:
                chunk //= 2
        return data

    def write_stats(self, extra: dict[str, Any] | None = None) -> None:
        stats = {
            "target": self.target.name,
            "inputs": self.inputs,
            "seconds": round(time.monotonic() - self.started, 2),
            "findings": self.findings,
            "slow": self.slow,
            **(extra or {}),
        }
        path = self.stats_path
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(stats, indent=1))
        os.replace(tmp, path)

    def close(self) -> None:
        os.close(self._current)
        shutil.rmtree(self.scratch_root, ignore_errors=True)


def _tmp_root() -> str | None:
    return "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else None

"""The hang doctor: a process stuck in a collective makes every process report, then exit.

Each collective of accel (``gather``, ``reduce``, ``broadcast``, ``wait_for_everyone`` ...) runs
inside `collective`, which records on this process the operation, its sequence number
and the shapes it moves (a few attribute writes; no communication). A daemon thread per
process, started with the process group, looks at that record every second (or a tenth of the
timeout): when this process has waited in one collective longer than the hang timeout, it raises
an alarm in the job's rendezvous store. Every process's thread sees the alarm at its next look
and posts where it is (in which collective, for how long, or outside any and since when) and
its Python stack; the process that raised the alarm prints one report naming the process(es)
that stopped participating, and every process exits with `HANG_EXIT_CODE`.

A process that dies is seen by the launcher, which stops the others and names it; a survivor
whose collective fails because its peer vanished says which collective it was in.

The timeout is ``ACCEL_HANG_TIMEOUT`` (``accel launch --hang_timeout``), else 80 % of the
process group's timeout (``InitProcessGroupKwargs(timeout=...)``, else torch's 30 minutes), so
the report comes before the backend's own timeout error; ``ACCEL_HANG_TIMEOUT=0`` turns the
watchdog off.
"""

from __future__ import annotations

import atexit
import datetime
import json
import os
import sys
import threading
import time
import traceback
from types import TracebackType
from typing import Any

from . import environment_variables as env

__all__ = ["HANG_EXIT_CODE", "collective", "hang_timeout", "start_watchdog", "stop_watchdog"]

HANG_EXIT_CODE = 124
"""Exit code of every process of a job the watchdog stopped (the code of ``timeout(1)``)."""

_DEFAULT_TIMEOUT = 1800.0
"""torch's default process-group timeout, in seconds."""
_GROUP_SHARE = 0.8
"""Share of the process group's timeout after which the watchdog reports (when
``ACCEL_HANG_TIMEOUT`` is unset), so it speaks before the backend's own timeout error."""


class _Record:
    """Where this process is: the current collective, the last one, counts per operation."""

    def __init__(self) -> None:
        self.sequence = 0
        self.current: tuple[str, int, Any, float] | None = None
        self.last: tuple[str, int, float] | None = None
        self.counts: dict[str, int] = {}


_record = _Record()


class collective:
    """Context manager around one collective call: records it for the watchdog.

    Args:
        operation: Name shown in reports (``"gather"``, ``"barrier"`` ...).
        payload: The tensors (or nested structure) the call moves; only their shapes are read,
            and only when a report is written.

    Example:
        >>> with collective("all_reduce", tensor):
        ...     dist.all_reduce(tensor)
    """

    __slots__ = ("operation", "payload", "sequence")

    def __init__(self, operation: str, payload: Any = None) -> None:
        self.operation = operation
        self.payload = payload
        self.sequence = 0

    def __enter__(self) -> collective:
        record = _record
        record.sequence += 1
        self.sequence = record.sequence
        record.counts[self.operation] = record.counts.get(self.operation, 0) + 1
        record.current = (self.operation, self.sequence, self.payload, time.monotonic())
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        _record.current = None
        _record.last = (self.operation, self.sequence, time.monotonic())
        if exc is not None and _watchdog is not None and isinstance(exc, RuntimeError):
            print(
                f"accel hang doctor: rank {_watchdog.rank} was in {self.operation} "
                f"#{self.sequence} (shapes {_shapes(self.payload)}) when it failed; a peer that "
                "died or left makes this collective fail (the launcher names it).",
                file=sys.stderr,
                flush=True,
            )


def _shapes(payload: Any) -> Any:
    """Shapes of the tensors in a nested structure (other leaves by type name)."""
    if payload is None:
        return None
    shape = getattr(payload, "shape", None)
    if shape is not None:
        return list(shape)
    if isinstance(payload, dict):
        return {str(k): _shapes(v) for k, v in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [_shapes(v) for v in payload[:8]] + (["..."] if len(payload) > 8 else [])
    return type(payload).__name__


def hang_timeout(group_timeout: datetime.timedelta | float | None = None) -> float:
    """Seconds a collective may wait before the watchdog reports (0: watchdog off).

    Args:
        group_timeout: The process group's timeout, used when ``ACCEL_HANG_TIMEOUT`` is unset.
    """
    value = env.read_env(env.ACCEL_HANG_TIMEOUT)
    if value is not None:
        return float(value)
    if isinstance(group_timeout, datetime.timedelta):
        seconds = group_timeout.total_seconds()
    elif group_timeout is not None:
        seconds = float(group_timeout)
    else:
        seconds = _DEFAULT_TIMEOUT
    # Report before the backend's own timeout turns the hang into a bare error.
    return _GROUP_SHARE * seconds


class _Watchdog(threading.Thread):
    def __init__(self, store: Any, rank: int, world: int, timeout: float) -> None:
        super().__init__(name="accel-hang-watchdog", daemon=True)
        self.store = store
        self.rank = rank
        self.world = world
        self.timeout = timeout
        self.poll = min(1.0, max(0.05, timeout / 10))
        self.grace = min(10.0, max(2.0, timeout / 2))
        self.stopped = threading.Event()

    def run(self) -> None:
        while not self.stopped.wait(self.poll):
            waited, busy = _waited()
            try:
                if waited > self.timeout:
                    raw = self.store.compare_set("alarm", "", str(self.rank))
                    self._respond(int(raw))
                elif self.store.check(["alarm"]):
                    self._respond(int(self.store.get("alarm")))
            except Exception as exc:  # the store is gone: the launcher or rank 0 died
                if waited > self.timeout:
                    print(self._alone(f"the rendezvous store is unreachable ({exc})"), end="")
                    _exit()
                if self.stopped.is_set() or not busy:
                    return

    def _respond(self, alarmer: int) -> None:
        self.store.set(f"report/{self.rank}", json.dumps(_where(self.rank)))
        if self.rank == alarmer:
            reports: dict[int, dict[str, Any]] = {}
            deadline = time.monotonic() + self.grace
            while len(reports) < self.world and time.monotonic() < deadline:
                for rank in range(self.world):
                    if rank not in reports and self.store.check([f"report/{rank}"]):
                        reports[rank] = json.loads(self.store.get(f"report/{rank}"))
                time.sleep(0.05)
            print(format_report(reports, self.world, alarmer, self.timeout), end="", flush=True)
            self.store.set("printed", "1")
        else:
            deadline = time.monotonic() + self.grace + 2
            while time.monotonic() < deadline and not self.store.check(["printed"]):
                time.sleep(0.05)
            print(
                f"accel hang doctor: rank {self.rank} stops (report printed by rank {alarmer}).",
                file=sys.stderr,
                flush=True,
            )
        _exit()

    def _alone(self, why: str) -> str:
        report = {self.rank: _where(self.rank)}
        return format_report(report, self.world, self.rank, self.timeout, why)


def _waited() -> tuple[float, bool]:
    """Seconds this process has waited in its current collective, and whether it is in one.

    Reads the record without keeping it: the watchdog thread must hold no reference to the
    collective's tensors, or the last one could be freed on that thread while the interpreter
    finalises, which aborts the process (``terminate called without an active exception``).
    """
    current = _record.current
    if current is None:
        return 0.0, False
    return time.monotonic() - current[3], True


def _exit() -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(HANG_EXIT_CODE)


def _where(rank: int) -> dict[str, Any]:
    """This process's position and the stack of its main thread."""
    now = time.monotonic()
    current, last = _record.current, _record.last
    where: dict[str, Any] = {"rank": rank, "counts": dict(_record.counts)}
    if current is not None:
        operation, sequence, payload, since = current
        where.update(op=operation, seq=sequence, shapes=_shapes(payload), waited=now - since)
    if last is not None:
        where.update(last_op=last[0], last_seq=last[1], idle=now - last[2])
    frame = sys._current_frames().get(threading.main_thread().ident or -1)
    where["stack"] = "".join(traceback.format_stack(frame)) if frame is not None else ""
    return where


def _stuck(reports: dict[int, dict[str, Any]], world: int, alarmer: int) -> list[str]:
    """One line per process that does not wait where the alarming process waits."""
    head = reports.get(alarmer, {})
    op, count = head.get("op"), head.get("counts", {}).get(head.get("op"), 0)
    lines = []
    for rank in range(world):
        where = reports.get(rank)
        if where is None:
            lines.append(f"rank {rank} did not answer (dead, or stuck in code holding the GIL)")
        elif "op" not in where:
            last = where.get("last_op")
            after = f"after {last} #{where.get('last_seq')}" if last else "before any"
            lines.append(f"rank {rank} is not in a collective ({after}): it stopped taking part")
        elif where["op"] != op or where.get("counts", {}).get(op, 0) != count:
            lines.append(
                f"rank {rank} waits in {where['op']} #{where['seq']} while rank {alarmer} waits "
                f"in {op} #{head.get('seq')} (its {op} call {count}; rank {rank} made "
                f"{where.get('counts', {}).get(op, 0)}): a process skipped or added a collective"
            )
    return lines


def format_report(
    reports: dict[int, dict[str, Any]],
    world: int,
    alarmer: int,
    timeout: float,
    why: str | None = None,
) -> str:
    """The hang report: who is stuck, then every process's position and stack."""
    head = reports.get(alarmer, {})
    out = [
        f"accel hang doctor: rank {alarmer} waited more than {timeout:g} s in "
        f"{head.get('op')} #{head.get('seq')} (shapes {head.get('shapes')})"
        + (f"; {why}" if why else "")
    ]
    stuck = _stuck(reports, world, alarmer)
    out += [f"  STUCK: {line}" for line in stuck]
    if not stuck:
        out.append(
            "  every process waits in this same collective: the backend itself is stuck, or a "
            "process is also waiting in a collective accel does not record (DDP's backward, a "
            "direct torch.distributed call)"
        )
    for rank in sorted(reports):
        where = reports[rank]
        if "op" in where:
            state = (
                f"in {where['op']} #{where['seq']}, shapes {where['shapes']}, waiting "
                f"{where['waited']:.1f} s"
            )
        else:
            state = f"outside any collective for {where.get('idle', 0.0):.1f} s"
        out.append(f"--- rank {rank}: {state}; calls so far {where['counts']}")
        out.append(where["stack"].rstrip())
    out.append(
        f"Every process exits with code {HANG_EXIT_CODE}. Fix the rank named STUCK; if a "
        f"collective legitimately waits longer than {timeout:g} s (rank 0 preparing data while "
        "the others wait), raise ACCEL_HANG_TIMEOUT or accel launch --hang_timeout."
    )
    return "\n".join(out) + "\n"


_watchdog: _Watchdog | None = None


def start_watchdog(
    rank: int,
    world_size: int,
    master_addr: str | None,
    master_port: str | int | None,
    prefix: str,
    timeout: float,
) -> bool:
    """Start this process's watchdog thread (once); False when it cannot or should not run.

    Args:
        rank: Global rank of this process.
        world_size: Number of processes.
        master_addr: Host of the job's rendezvous store.
        master_port: Its port.
        prefix: Key prefix of this job (and attempt) in that store.
        timeout: Seconds from `hang_timeout`; 0 or less starts nothing.

    Raises:
        ValueError: a timeout was asked for explicitly but the store's address is unknown.
    """
    global _watchdog
    if _watchdog is not None or timeout <= 0 or world_size < 2:
        return _watchdog is not None
    if not master_addr or not master_port:
        if env.read_env(env.ACCEL_HANG_TIMEOUT) is not None:
            raise ValueError(
                "the hang watchdog reaches the other processes through the rendezvous store at "
                f"MASTER_ADDR:MASTER_PORT; got {master_addr!r}:{master_port!r}. Set both "
                "(accel launch and torchrun do), or unset ACCEL_HANG_TIMEOUT."
            )
        return False
    import torch.distributed as dist

    client = dist.TCPStore(
        master_addr,
        int(master_port),
        world_size,
        is_master=False,
        timeout=datetime.timedelta(seconds=max(30.0, timeout)),
    )
    store = dist.PrefixStore(f"{prefix}hang/", client)
    _watchdog = _Watchdog(store, rank, world_size, timeout)
    _watchdog.start()
    atexit.register(stop_watchdog)
    return True


def stop_watchdog(join_timeout: float = 10.0) -> None:
    """Stop this process's watchdog thread and wait for it (at exit, before the process group
    goes).

    The thread is joined so it has ended before the interpreter finalises: a daemon thread still
    running then is stopped inside whatever C++ call it is in, which aborts the process.

    Args:
        join_timeout: Seconds to wait for the thread (it wakes within its poll interval, at
            most one second, unless a store call blocks).
    """
    global _watchdog
    watchdog, _watchdog = _watchdog, None
    if watchdog is not None:
        watchdog.stopped.set()
        if watchdog is not threading.current_thread():
            watchdog.join(join_timeout)

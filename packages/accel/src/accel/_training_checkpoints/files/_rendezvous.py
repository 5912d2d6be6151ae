"""Timed rendezvous of all processes around a checkpoint, through the process group's store.

``save_state`` must run on every process. A call on one process only would wait forever in a
collective; here every process posts a key to the rendezvous store and waits for the others'
keys with a deadline, so such a call fails on the waiting process with an error that says
which processes never arrived. A process that fails while writing posts its error instead of
``ok``, so the others raise at once rather than waiting for it.
"""

from __future__ import annotations

import time
from datetime import timedelta
from typing import Any

import torch.distributed as dist
from accel_state.environment_variables import ACCEL_CHECKPOINT_TIMEOUT, read_env

TIMEOUT_ENV = ACCEL_CHECKPOINT_TIMEOUT
DEFAULT_ARRIVAL_TIMEOUT = 600.0
_OK = "ok:"
_ERROR = "error:"
_COMMITTED = "Nothing was committed"
_OUTCOME = {
    ("load_state", "enter"): "Nothing was loaded",
    ("load_state", "validated"): "Nothing was loaded (every file is checked before any change)",
    ("load_state", "restored"): (
        "Nothing was changed: the states restored before the failure were put back, and the "
        "model weights, which load last, were not touched"
    ),
    ("load_state", "applied"): (
        "The optimizers, schedulers, grad scaler, dataloaders, registered objects and random "
        "states were put back; model weights already streamed in were not"
    ),
}


class CheckpointSyncError(RuntimeError):
    """Processes did not meet, or one of them failed, during a collective checkpoint step."""


def arrival_timeout() -> float:
    """Seconds every process waits for the others to call save_state / load_state:
    ``ACCEL_CHECKPOINT_TIMEOUT`` read by the environment contract (a number > 0, checked when
    the state is created), else `DEFAULT_ARRIVAL_TIMEOUT`."""
    return float(read_env(TIMEOUT_ENV, DEFAULT_ARRIVAL_TIMEOUT))


class Rendezvous:
    """Named meeting points of all processes for one checkpoint operation.

    Args:
        operation: ``"save_state"`` or ``"load_state"`` (used in messages and keys).

    Every operation of this process gets the next number of one process-wide sequence, so
    keys never repeat while the process group (and its store) lives, even when several
    ``Accelerator`` objects are created one after another: every process creates them and
    checkpoints in the same order, so the numbers agree across processes.
    """

    _count = 0
    """Operations started by this process so far."""

    _previous: Rendezvous | None = None
    """The last operation of this process; its keys are deleted once every process has
    entered the next one (by then all have read them)."""

    def __init__(self, operation: str) -> None:
        Rendezvous._count += 1
        self.operation = operation
        self.sequence = Rendezvous._count
        self.enabled = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.rank = dist.get_rank() if self.enabled else 0
        self.world = dist.get_world_size() if self.enabled else 1
        self._store: Any = _default_store() if self.enabled else None
        self._posted: list[str] = []

    def _key(self, phase: str, rank: int) -> str:
        return f"accel/checkpoint/{self.operation}/{self.sequence}/{phase}/{rank}"

    def meet(
        self,
        phase: str,
        payload: str = "",
        timeout: float | None = None,
        error: str | None = None,
        *,
        poll: bool = False,
    ) -> list[str]:
        """Post this process's payload (or error) for ``phase`` and wait for all processes.

        Args:
            phase: Name of the meeting point.
            payload: Text every process receives from this one.
            timeout: Seconds to wait (``ACCEL_CHECKPOINT_TIMEOUT`` when None).
            error: Post this failure instead of a payload, and return at once.
            poll: Wait by asking the store every few milliseconds instead of one blocking
                ``wait``: the store's client serves one request at a time, so a blocking wait
                on a background thread would stall every store request of the training thread
                for as long as it lasts.

        Returns:
            The payload of every process, by rank.

        Raises:
            CheckpointSyncError: when some process does not arrive in time or posted an error.
        """
        if not self.enabled:
            return [payload]
        key = self._key(phase, self.rank)
        self._posted.append(key)
        if error is not None:
            # The failing process tells the others and goes on raising its own exception.
            self._store.set(key, _ERROR + error)
            return []
        self._store.set(key, _OK + payload)
        keys = [self._key(phase, r) for r in range(self.world)]
        wait = arrival_timeout() if timeout is None else timeout
        try:
            if poll:
                _poll(self._store, keys, wait)
            else:
                self._store.wait(keys, timedelta(seconds=wait))
        except Exception:
            missing = [r for r, k in enumerate(keys) if not self._store.check([k])]
            # Withdraw this process's key, so that a later lone call does not take it for
            # a partner that arrived, and give its number back: the processes that never
            # came did not count this operation, and the next collective call must agree.
            self._delete(key)
            if Rendezvous._count == self.sequence:
                Rendezvous._count -= 1
            raise CheckpointSyncError(
                f"{self.operation} must be called on every process (it is collective); "
                f"process {self.rank} waited {wait:.0f}s at step {phase!r} but processes "
                f"{missing} of {self.world} never reached it. Call "
                f"accelerator.{self.operation}(...) on all processes, not inside "
                f"`if accelerator.is_main_process:` (set {TIMEOUT_ENV} to wait longer for "
                "slow processes)."
            ) from None
        values = [self._store.get(k).decode() for k in keys]
        previous = Rendezvous._previous
        if previous is not self:
            if previous is not None:
                previous.cleanup()
            Rendezvous._previous = self
        failures = [(r, v[len(_ERROR) :]) for r, v in enumerate(values) if v.startswith(_ERROR)]
        if failures:
            detail = "; ".join(f"process {r}: {msg}" for r, msg in failures)
            raise CheckpointSyncError(
                f"{self.operation} needs every process to succeed; it failed on {detail}. "
                f"{_OUTCOME.get((self.operation, phase), _COMMITTED)}: fix that error and try "
                "again."
            )
        return [v[len(_OK) :] for v in values]

    def cleanup(self) -> None:
        """Delete this process's keys (call once every process has read them)."""
        if self._store is None:
            return
        for key in self._posted:
            self._delete(key)
        self._posted.clear()

    def _delete(self, key: str) -> None:
        try:
            self._store.delete_key(key)
        except Exception:
            pass  # some stores cannot delete keys; they are a few bytes each


def _poll(store: Any, keys: list[str], seconds: float) -> None:
    """Return once every key is in ``store``; raise TimeoutError after ``seconds``."""
    deadline = time.monotonic() + seconds
    delay = 0.001
    while not store.check(keys):
        if time.monotonic() > deadline:
            raise TimeoutError(f"keys {keys} not all set after {seconds:.0f}s")
        time.sleep(delay)
        delay = min(delay * 2, 0.05)


def _default_store() -> Any:
    from torch.distributed import distributed_c10d

    return distributed_c10d._get_default_store()

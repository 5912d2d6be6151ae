"""Orderly shutdown of the process group at interpreter exit.

gloo's worker threads can abort the interpreter (``terminate called without an active
exception``) when a process exits while they are still alive. Tearing the group down in order
(a barrier so no peer is mid-collective, then ``destroy_process_group``) before the interpreter
finalises avoids it.
"""

from __future__ import annotations

import atexit
import datetime
import sys
import threading

import torch.distributed as dist

from . import environment_variables as env

_registered = False
_lock = threading.Lock()
_crashed = False
_previous_excepthook = sys.excepthook


def _note_crash(exc_type, exc, tb):
    global _crashed
    _crashed = True
    _previous_excepthook(exc_type, exc, tb)


def teardown_process_group(barrier_timeout: float | None = None) -> None:
    """Destroy the default process group in order; safe to call when none exists.

    Args:
        barrier_timeout: Seconds to wait for the peers at the closing barrier. ``None`` reads
            ``ACCEL_TEARDOWN_TIMEOUT`` (default 60). A crashed process skips the barrier.
    """
    if not (dist.is_available() and dist.is_initialized()):
        return
    if barrier_timeout is None:
        barrier_timeout = env.read_env(env.ACCEL_TEARDOWN_TIMEOUT, 60.0)
    try:
        if not _crashed and dist.get_world_size() > 1:
            if dist.get_backend() == "gloo":
                dist.monitored_barrier(
                    timeout=datetime.timedelta(seconds=barrier_timeout), wait_all_ranks=True
                )
            else:
                dist.barrier()
    except Exception:
        pass
    finally:
        try:
            dist.destroy_process_group()
        except Exception:
            pass


def register_teardown() -> None:
    """Arrange for :func:`teardown_process_group` to run at exit (once per process)."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        sys.excepthook = _note_crash
        atexit.register(teardown_process_group)

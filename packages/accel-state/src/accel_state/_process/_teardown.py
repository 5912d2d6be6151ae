"""Orderly shutdown of the process group at interpreter exit.

gloo's worker threads can abort the interpreter (``terminate called without an active
exception``) when a process exits while they are still alive. Tearing the group down in order
(a barrier so no peer is mid-collective, then ``destroy_process_group``) before the interpreter
finalises avoids it.

Destroying the group only joins those threads when nothing else keeps the group object alive.
Some torch modules capture it at import: functions of ``torch.distributed.nn.functional``
(and a few others) take ``group=group.WORLD`` as a default argument, which is evaluated when the
module is first imported, so a module imported after ``init_process_group`` (pipelining imports
it) holds the default group in its defaults for ever. Those defaults are reset to ``None``
(which every such function reads as the default group) before the group is destroyed.
"""

from __future__ import annotations

import atexit
import datetime
import sys
import threading
import types
from typing import Any

import torch.distributed as dist

from .. import crash_report
from .. import environment_variables as env

_registered = False
_lock = threading.Lock()
_crashed = False
_previous_excepthook = sys.excepthook


def _note_crash(exc_type, exc, tb):
    """Note the crash (the closing barrier is skipped), then report it: in a group of several
    processes, once and prefixed with the rank (see ``accel_state.crash_report``)."""
    global _crashed
    _crashed = True
    if _previous_excepthook is sys.__excepthook__ and exc is not None:
        try:
            several = dist.is_initialized() and dist.get_world_size() > 1
            rank = dist.get_rank() if several else 0
        except Exception:
            several, rank = False, 0
        if several:
            crash_report.report(rank, exc_type, exc, tb)
            return
    _previous_excepthook(exc_type, exc, tb)


def _defaults_without(defaults: Any, group: object) -> Any:
    if isinstance(defaults, tuple) and any(value is group for value in defaults):
        return tuple(None if value is group else value for value in defaults)
    if isinstance(defaults, dict) and any(value is group for value in defaults.values()):
        return {key: None if value is group else value for key, value in defaults.items()}
    return None


_WRAPPERS = (staticmethod, classmethod, types.MethodType)


def _release_captured_defaults(group: object) -> int:
    """Replaces ``group`` by ``None`` in the default arguments of torch.distributed's functions.

    Returns:
        How many functions held it.
    """
    released = 0
    for name, module in list(sys.modules.items()):
        if not name.startswith("torch.distributed") or module is None:
            continue
        for value in list(vars(module).values()):
            # Only exact type checks: isinstance and getattr would read ``__class__`` and
            # ``__func__`` through the attribute hooks of deprecated objects such as
            # ``torch.distributed.reduce_op``, each of which warns.
            candidates = vars(value).values() if issubclass(type(value), type) else (value,)
            for function in candidates:
                if type(function) in _WRAPPERS:
                    function = function.__func__
                if type(function) is not types.FunctionType:
                    continue
                defaults = _defaults_without(function.__defaults__, group)
                if defaults is not None:
                    function.__defaults__ = defaults
                    released += 1
                kwdefaults = _defaults_without(function.__kwdefaults__, group)
                if kwdefaults is not None:
                    function.__kwdefaults__ = kwdefaults
                    released += 1
    return released


def destroy_default_group() -> None:
    """Destroys the default group (and every other) after releasing torch's captured defaults.

    No garbage collection follows: freeing gloo groups held in reference cycles right after the
    destroy aborted processes at exit (``terminate called without an active exception``) in four
    2-process launches of one run of the test suite.
    """
    _release_captured_defaults(dist.group.WORLD)
    dist.destroy_process_group()


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
            destroy_default_group()
        except Exception:
            pass


def register_teardown() -> None:
    """Arrange for [`teardown_process_group`][accel_state.teardown_process_group] to run at exit (once per process)."""
    global _registered
    with _lock:
        if _registered:
            return
        _registered = True
        sys.excepthook = _note_crash
        atexit.register(teardown_process_group)

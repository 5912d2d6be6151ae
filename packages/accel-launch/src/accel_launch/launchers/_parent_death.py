"""Processes started by ``accel launch`` die with the process that started them (Linux).

A launcher killed with ``kill -9`` cannot stop its processes: without help they keep running,
orphaned, holding GPUs and ports. On Linux each child asks the kernel, between ``fork`` and
``exec``, for a signal when its parent ends (``prctl(PR_SET_PDEATHSIG)``). The kernel sends it
when the *thread* that started the child ends, so children are started from the main thread.
Elsewhere (macOS, Windows) this does nothing.
"""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator
from typing import Any

_PR_SET_PDEATHSIG = 1


def _prctl() -> Callable[..., int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
    except OSError:
        return None
    function: Callable[..., int] = libc.prctl
    return function


_PRCTL = _prctl()


def supported() -> bool:
    """Whether children can be tied to their parent here (Linux)."""
    return _PRCTL is not None


def die_with_parent(parent: int, sig: int = signal.SIGKILL) -> None:
    """Ask for ``sig`` when the parent of this process ends; end now if ``parent`` (the pid
    read before the fork) already ended, since the kernel would then never send it."""
    if _PRCTL is None:
        return
    _PRCTL(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    if os.getppid() != parent:
        os.kill(os.getpid(), sig)


def preexec(sig: int = signal.SIGKILL) -> Callable[[], None] | None:
    """A ``preexec_fn`` for ``subprocess.Popen`` that ties the child to this process."""
    if _PRCTL is None:
        return None
    parent = os.getpid()
    return lambda: die_with_parent(parent, sig)


@contextlib.contextmanager
def torch_workers_die_with_agent() -> Iterator[None]:
    """While open, the workers torch's elastic agent starts in this process die with it.

    The agent starts each worker with ``subprocess.Popen`` from its subprocess handler; the
    handler's ``Popen`` is replaced by one that adds the ``preexec_fn`` of `preexec`.
    """
    if _PRCTL is None:
        yield
        return
    from torch.distributed.elastic.multiprocessing.subprocess_handler import (
        subprocess_handler as handler,
    )

    original = handler.Popen
    hook = preexec()

    class _TiedPopen(subprocess.Popen[bytes]):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            kwargs.setdefault("preexec_fn", hook)
            super().__init__(*args, **kwargs)

    handler.Popen = _TiedPopen  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        handler.Popen = original  # type: ignore[misc]

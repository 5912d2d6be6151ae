"""Processes started by ``accel launch`` die with the process that started them (Linux).

A launcher killed with ``kill -9`` cannot stop its processes: without help they keep running,
orphaned, holding GPUs and ports. On Linux each child asks the kernel, between ``fork`` and
``exec``, for a signal when its parent ends (``prctl(PR_SET_PDEATHSIG)``). The kernel sends it
when the *thread* that started the child ends, so children are started from the main thread.
Elsewhere (macOS, Windows) this does nothing.

Asking between ``fork`` and ``exec`` takes a ``preexec_fn``, which makes ``subprocess`` fork the
whole launcher (torch loaded: 19 ms a process here, against 0.4 ms without). The workers torchrun
starts are therefore tied through util-linux's ``setpriv --pdeathsig`` instead, which sets the
same signal and then runs the worker's command in the same process (``exec``), when it is
installed and knows that flag; otherwise through the ``preexec_fn``.
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import shutil
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
        # The symbols already loaded (libc's among them): no `ldconfig -p` run to find libc.
        libc = ctypes.CDLL(None, use_errno=True)
        function: Callable[..., int] = libc.prctl
    except (OSError, AttributeError):
        return None
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


@functools.cache
def _setpriv() -> str | None:
    """The path of a ``setpriv`` that takes ``--pdeathsig`` (util-linux 2.33+), or ``None``."""
    found = shutil.which("setpriv")
    if found is None:
        return None
    try:
        usage = subprocess.run([found, "--help"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return found if "--pdeathsig" in usage.stdout else None


def tied_command(args: object, sig: int = signal.SIGKILL) -> list[str] | None:
    """``args`` run through ``setpriv --pdeathsig``, so the process gets ``sig`` when its parent
    ends; ``None`` when that cannot be done (no such ``setpriv``, or ``args`` is not a list of
    words).

    Unlike the ``preexec_fn`` of `preexec`, ``setpriv`` cannot see that the parent already
    ended before it asked: a launcher killed in the millisecond between starting a worker and
    that request leaves the worker untied. Such a worker fails when it joins the process group
    (the agent held the group's store); a script that never joins one runs to its end.
    """
    if _PRCTL is None or not isinstance(args, (list, tuple)):
        return None
    if not all(isinstance(word, (str, os.PathLike)) for word in args):
        return None
    setpriv = _setpriv()
    if setpriv is None:
        return None
    words = [str(os.fspath(word)) for word in args]
    return [setpriv, f"--pdeathsig={signal.Signals(sig).name}", "--", *words]


@contextlib.contextmanager
def torch_workers_die_with_agent() -> Iterator[None]:
    """While open, the workers torch's elastic agent starts in this process die with it.

    The agent starts each worker with ``subprocess.Popen`` from its subprocess handler; the
    handler's ``Popen`` is replaced by one that runs the worker through `tied_command`, or
    adds the ``preexec_fn`` of `preexec` where that cannot be done.
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
            if "preexec_fn" not in kwargs:
                command = tied_command(args[0] if args else kwargs.get("args"))
                if command is None:
                    kwargs["preexec_fn"] = hook
                elif args:
                    args = (command, *args[1:])
                else:
                    kwargs["args"] = command
            super().__init__(*args, **kwargs)

    handler.Popen = _TiedPopen  # type: ignore[misc,assignment]
    try:
        yield
    finally:
        handler.Popen = original  # type: ignore[misc]

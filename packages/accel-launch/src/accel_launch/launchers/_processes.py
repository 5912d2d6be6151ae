"""Running the processes of ``accel launch`` and stopping them cleanly on Ctrl-C or a signal.

Ctrl-C on the launcher stops every process it started with SIGTERM (a Python process ends
without a traceback) and ends the launcher with `INTERRUPTED`; ``cli.main`` prints the one
line that says so.
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import logging
import os
import shutil
import signal
import subprocess
import sys
from types import FrameType
from typing import Any

from accel_state.crash_report import PEER_STOPPED
from accel_state.hang_watchdog import HANG_EXIT_CODE

from .._errors import ConfigError
from ._parent_death import preexec, torch_workers_die_with_agent

_STOP_GRACE = 30
"""Seconds a started launcher (mpirun, deepspeed) gets to stop its ranks before it is killed."""
_TORCH_LOGGERS = (
    "torch.distributed.elastic.agent.server.api",
    "torch.distributed.elastic.multiprocessing.api",
)


def check_target(target: str, module: bool, no_python: bool) -> None:
    """Refuse a script, module or executable that does not exist, before any process starts.

    A module is looked up the way ``python -m`` will (the current folder first) without
    importing anything: only the top-level name goes through the import system's finders, the
    rest is searched in the package folders.

    Raises:
        ConfigError: naming what was not found and how to fix it.
    """
    if no_python:
        if shutil.which(target) is None:
            raise ConfigError(
                f"accel launch --no_python runs an executable; {target!r} is neither on PATH nor "
                "an executable file. Check the name, or give its path."
            )
        return
    if not module:
        if not os.path.isfile(target):
            kind = "a folder" if os.path.isdir(target) else "missing"
            raise ConfigError(
                f"accel launch runs a Python script; {target!r} is {kind} (looked in "
                f"{os.getcwd()}). Check the path, or use -m package.module for a module."
            )
        return
    missing = _missing_module(target)
    if missing is not None:
        raise ConfigError(
            f"accel launch -m runs a module; {missing!r} of {target!r} cannot be found from "
            f"{os.getcwd()} or sys.path. Check the name, install its package, or run from the "
            "folder that holds it."
        )


def _missing_module(name: str) -> str | None:
    """The first part of the dotted ``name`` that cannot be found, or None."""
    parts = name.split(".")
    saved = list(sys.path)
    sys.path.insert(0, os.getcwd())  # what `python -m` puts first
    try:
        spec = importlib.util.find_spec(parts[0])
    except (ImportError, ValueError):
        spec = None
    finally:
        sys.path[:] = saved
    for depth in range(1, len(parts) + 1):
        if spec is None:
            return ".".join(parts[:depth])
        if depth == len(parts):
            return None
        locations = spec.submodule_search_locations
        if locations is None:
            return ".".join(parts[: depth + 1])  # a module, not a package: nothing below it
        spec = importlib.machinery.PathFinder.find_spec(".".join(parts[: depth + 1]), locations)
    return None


def run_child(argv: list[str], env: dict[str, str], forward_sigint: bool) -> int:
    """Run a child launcher (python, mpirun, deepspeed) and return its exit code.

    On Ctrl-C the child gets SIGINT (``forward_sigint``: a launcher that stops its own ranks)
    or SIGTERM, then is killed after `_STOP_GRACE` seconds; ``KeyboardInterrupt`` is
    raised again once it is gone.

    The child dies with this process (Linux): SIGKILL for a process of the job, SIGTERM for a
    launcher (``forward_sigint``), so that it stops its own ranks first.
    """
    death = signal.SIGTERM if forward_sigint else signal.SIGKILL
    proc = subprocess.Popen(argv, env=env, preexec_fn=preexec(death))
    try:
        return proc.wait()
    except KeyboardInterrupt:
        proc.send_signal(signal.SIGINT if forward_sigint else signal.SIGTERM)
        try:
            proc.wait(timeout=_STOP_GRACE)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        raise


class _Quiet(logging.Filter):
    """Drops torchrun's own lines about stopping workers once accel reports the interrupt."""

    def __init__(self) -> None:
        super().__init__()
        self.active = False

    def filter(self, record: logging.LogRecord) -> bool:
        text = str(record.msg)
        return not (self.active and ("death signal" in text or "closing signal" in text))


def run_torchrun(argv: list[str], env: dict[str, Any], quiet: bool) -> int:
    """Run torch.distributed.run in this process with ``env`` as the environment.

    Ctrl-C (SIGINT) stops the workers with SIGTERM and raises ``KeyboardInterrupt``; SIGTERM,
    SIGHUP or SIGQUIT stop them too and return 128 + the signal number. The workers die with
    this process when it is killed outright (Linux).
    """
    from torch.distributed.elastic.multiprocessing import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    os.environ.clear()
    os.environ.update(env)
    # torchrun would pass SIGINT on to the workers, whose Python code then prints a
    # KeyboardInterrupt traceback each; accel handles SIGINT itself and stops them with SIGTERM.
    handled = "SIGTERM,SIGHUP,SIGQUIT"
    os.environ.setdefault("TORCHELASTIC_SIGNALS_TO_HANDLE", handled)  # older torch reads this
    parser = get_args_parser()
    if any("--signals_to_handle" in a.option_strings for a in parser._actions):
        argv = [f"--signals_to_handle={os.environ.get('PET_SIGNALS_TO_HANDLE', handled)}", *argv]
    torch_args = parser.parse_args(argv)
    if quiet:
        logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
    hush = _Quiet()
    for name in _TORCH_LOGGERS:
        logging.getLogger(name).addFilter(hush)

    def on_sigint(signum: int, frame: FrameType | None) -> None:
        hush.active = True
        raise SignalException("Ctrl-C", sigval=signal.SIGTERM)

    previous = signal.signal(signal.SIGINT, on_sigint)
    try:
        with torch_workers_die_with_agent():
            run(torch_args)
    except SignalException as err:
        if hush.active:
            raise KeyboardInterrupt from None
        print(
            f"accel launch: stopped by signal {err.sigval.name}; every process it started was "
            "stopped.",
            file=sys.stderr,
        )
        return 128 + int(err.sigval)
    except ChildFailedError as err:
        return _report_failure(err)
    finally:
        signal.signal(signal.SIGINT, previous)
        for name in _TORCH_LOGGERS:
            logging.getLogger(name).removeFilter(hush)
    return 0


def _first_failure(err: Any) -> tuple[int, Any]:
    """The rank that failed first and its failure.

    A process whose collective failed because a peer stopped says so in its error file
    (``PEER_STOPPED``): those are passed over when another process failed on its own, whatever
    the order in which torchrun noticed them. A process ended by SIGTERM without recording
    anything (how torchrun stops the others) comes after the rest: torchrun's timestamps are
    whole seconds, so the process it stopped can carry the same time as the one that failed.
    """
    failures = dict(err.failures)
    causes = {
        rank: failure
        for rank, failure in failures.items()
        if not _message(failure).startswith(PEER_STOPPED)
    }
    if not causes:
        return err.get_first_failure()
    rank = min(causes, key=lambda r: (_stopped_by_torchrun(causes[r]), causes[r].timestamp, r))
    return rank, causes[rank]


def _stopped_by_torchrun(failure: Any) -> bool:
    """Whether the process ended by SIGTERM with nothing recorded: torchrun's stop, once
    another process had failed (an exception, an error exit, or another signal: SIGKILL from
    the out-of-memory killer)."""
    return failure.exitcode == -signal.SIGTERM and not _wrote_error_file(failure)


def _message(failure: Any) -> str:
    """The failure's one-line message: torchrun keeps an error file's ``message`` as written,
    a text or (from ``torch.distributed.elastic``'s ``@record``) a dict holding the text."""
    message = failure.message or ""
    if isinstance(message, dict):
        message = message.get("message", "")
    return str(message)


def _wrote_error_file(failure: Any) -> bool:
    """Whether the process recorded its exception (torchrun reads the error file when the
    process ends; without one, a signalled process's message is made up from the signal)."""
    data = getattr(failure, "error_file_data", None) or {}
    return data.get("message") not in (None, "", "<NONE>")


def _report_failure(err: Any) -> int:
    rank, failure = _first_failure(err)
    reason = _message(failure)
    exitcode = failure.exitcode
    if not reason or reason.startswith("To enable traceback"):
        # torchrun's placeholder: the real traceback was printed by the process itself.
        reason = "see its traceback above"
    elif reason.startswith(PEER_STOPPED):
        reason = f"{reason[len(PEER_STOPPED) :]}; see the tracebacks above"
    elif _wrote_error_file(failure):  # the process's own exception
        reason = f"{reason}; its traceback is above, each line starting [rank {rank}]"
        if exitcode < 0:
            # It raised and was exiting with 1 when torchrun, stopping the others after a peer's
            # collective failed, signalled it too: the exception is the cause, not the signal.
            reason = f"{reason}; signal {-exitcode} reached it as it exited"
            exitcode = 1
    if exitcode == HANG_EXIT_CODE:
        reason = "stopped by the hang doctor; its report is above"
    if exitcode is not None and exitcode < 0:
        reason = f"killed by signal {-exitcode}; {reason}"
    print(
        f"accel launch: process of global rank {rank} failed with exit code "
        f"{exitcode} ({reason}); every other process was stopped.",
        file=sys.stderr,
    )
    return int(exitcode) if exitcode and exitcode > 0 else 1

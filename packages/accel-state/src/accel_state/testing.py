"""Helpers for tests that run real processes: every run is bounded by a timeout.

``run_distributed`` starts a script on N local processes through ``torch.distributed.run``
(torchrun) on a free port, kills the whole process tree when the timeout passes, and returns
the completed process with its output, so that a hung collective fails a test instead of
hanging it. The failure shows where every Python process of the tree was waiting: each one
prints its threads' stacks before it is killed.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def free_port() -> int:
    """Return a TCP port that is free on the loopback interface right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def failure_report(out: str, err: str, tail: int = 30) -> str:
    """The output of a failed command, its cause first.

    The last ``tail`` lines of stderr without warnings come first, where a truncated log still
    shows them (the error and the launcher's summary are at the end of stderr, and a log is
    often cut after its first lines); the whole stdout and stderr follow.
    """
    lines = err.splitlines()
    kept: list[str] = []
    for i, line in enumerate(lines):
        if not line.strip() or "Warning: " in line:
            continue
        if i and "Warning: " in lines[i - 1] and line.startswith((" ", "\t")):
            continue  # the source line a warning prints under itself
        kept.append(line)
    return (
        "--- end of stderr, warnings left out ---\n" + "\n".join(kept[-tail:]) + "\n"
        f"--- stdout ---\n{out}\n--- stderr ---\n{err}"
    )


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (state, parent, ...), or
    ``None`` once the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            return stat.read().rpartition(")")[2].split()
    except OSError:
        return None


def _children_by_parent() -> dict[int, list[int]]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        fields = _stat_fields(entry) if entry.isdigit() else None
        if fields is not None:
            children.setdefault(int(fields[1]), []).append(int(entry))
    return children


def _process_tree(pid: int) -> list[int]:
    """``pid`` and every living process below it, parents first (Linux; elsewhere ``[pid]``).

    Found through parent links, so it includes the processes that left ``pid``'s process
    group: torchrun starts each worker in a session of its own.
    """
    if not os.path.isdir("/proc"):
        return [pid]
    children = _children_by_parent()
    tree, index = [pid], 0
    while index < len(tree):
        tree += children.get(tree[index], [])
        index += 1
    return tree


def _signal_all(pids: Sequence[int], signum: int) -> None:
    for pid in pids:
        try:
            os.kill(pid, signum)
        except (ProcessLookupError, PermissionError):
            pass


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie, ended and not yet reaped, does not)."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _stop_process_tree(proc: subprocess.Popen[str], grace: float = 1.0) -> tuple[str, str]:
    """Stop ``proc`` and every process below it; return what they printed.

    The whole tree is frozen first (``SIGSTOP``), so that no process reacts to another's end.
    Then each process in turn gets ``SIGABRT`` and is let go: a Python process started with
    ``PYTHONFAULTHANDLER=1`` (``run_command`` sets it) prints where each of its threads was,
    one process after the other. After ``grace`` seconds per process (less when it ended),
    whatever is left of the tree, and of ``proc``'s process group, is killed.
    """
    tree = _process_tree(proc.pid)  # before any signal: an orphan's parent link is lost
    if len(tree) > 1:  # /proc found the tree
        _signal_all(tree, signal.SIGSTOP)
        for pid in tree:
            _signal_all([pid], signal.SIGABRT)
            _signal_all([pid], signal.SIGCONT)
            deadline = time.monotonic() + grace
            while time.monotonic() < deadline and _running(pid):
                time.sleep(0.02)
    _signal_all(_process_tree(proc.pid) + tree, signal.SIGKILL)
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        return proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:  # a process outside the tree holds the pipes
        proc.kill()
        return "", "(the output could not be read: a process outside the tree keeps it open)"


def run_command(
    command: Sequence[str],
    *,
    timeout: float = 180.0,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``command`` in its own process group; kill the group after ``timeout`` seconds.

    Raises:
        AssertionError: when ``check`` and the command fails or times out; the message holds
            the command's output.
    """
    full_env = {**os.environ, **(env or {})}
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.setdefault("PYTHONFAULTHANDLER", "1")  # the stacks printed when a run is stopped
    proc = subprocess.Popen(
        list(command),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        out, err = _stop_process_tree(proc)
        raise AssertionError(
            f"command timed out after {timeout}s: {' '.join(command)}\n{failure_report(out, err)}"
        ) from None
    except BaseException:  # a test's own timeout or Ctrl-C: stop the tree, show its output
        out, err = _stop_process_tree(proc)
        print(f"command stopped: {' '.join(command)}\n{failure_report(out, err)}", flush=True)
        raise
    result = subprocess.CompletedProcess(list(command), proc.returncode, out, err)
    if check and proc.returncode != 0:
        raise AssertionError(
            f"command exited {proc.returncode}: {' '.join(command)}\n{failure_report(out, err)}"
        )
    return result


def run_distributed(
    script: str | os.PathLike[str],
    *args: str,
    num_processes: int = 2,
    timeout: float = 180.0,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run ``script`` on ``num_processes`` local processes through torchrun.

    Args:
        script: Path of the Python script.
        *args: Arguments of the script.
        num_processes: Number of processes.
        timeout: Seconds before the whole run is killed and the call fails.
        env: Extra environment variables.
        check: Fail (AssertionError with the output) when the run exits non-zero.
    """
    command = [
        sys.executable,
        "-m",
        "torch.distributed.run",
        f"--nproc_per_node={num_processes}",
        "--master_addr=127.0.0.1",
        f"--master_port={free_port()}",
        "--monitor_interval=0.1",
        str(Path(script)),
        *args,
    ]
    return run_command(command, timeout=timeout, env=env, check=check)


def reset_state() -> None:
    """Forget every shared state object, so the next ``Accelerator()`` or ``PartialState()``
    starts from scratch (the public form of ``AcceleratorState._reset_state(True)`` plus
    ``GradientState._reset_state()``).

    For tests that create several accelerators in one process. A process group that exists
    stays as it is: the next state joins it again.

    Example:
        >>> @pytest.fixture(autouse=True)
        ... def fresh_state():
        ...     reset_state()
        ...     yield
        ...     reset_state()
    """
    from ._process._accelerator_state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()

"""Start commands from tests: accel's launch command, a runner that streams a command's output
and stops it (with its children) at a timeout, and the helpers for ports and paths."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import IO, Any

from ._test_device import device_count


def get_launch_command(**kwargs: Any) -> list[str]:
    """The command that launches a script with accel, with ``kwargs`` as its flags.

    ``True`` becomes a bare flag (``cpu=True`` -> ``--cpu``), ``False`` and ``None`` are left
    out, any other value becomes ``--name=value``. While ``install_as_accelerate()`` is on in
    this process, ``--as_accelerate`` is added, so scripts that import ``accelerate`` run on
    accel in the launched processes too.

    Args:
        **kwargs: Flags of ``accel launch`` (``num_processes=2``, ``monitor_interval=0.1``).

    Returns:
        ``["accel", "launch", ...flags]`` (``[python, "-m", "accel_launch.cli", "launch", ...]``
        when the ``accel`` command is not on ``PATH``); append the script and its arguments.

    Example:
        >>> get_launch_command(num_processes=2, cpu=True)
        ['accel', 'launch', '--num_processes=2', '--cpu']
    """
    from .._reexports._as_accelerate import is_installed_as_accelerate

    if shutil.which("accel") is not None:
        command = ["accel", "launch"]
    else:
        command = [sys.executable, "-m", "accel_launch.cli", "launch"]
    for name, value in kwargs.items():
        if isinstance(value, bool):
            if value:
                command.append(f"--{name}")
        elif value is not None:
            command.append(f"--{name}={value}")
    if is_installed_as_accelerate() and "--as_accelerate" not in command:
        command.append("--as_accelerate")
    return command


DEFAULT_LAUNCH_COMMAND = get_launch_command(num_processes=device_count, monitor_interval=0.1)
"""``accel launch`` on every device of this machine (one process on a CPU-only machine)."""


class _RunOutput:
    """What a finished command left: its exit code and its output, one string per line."""

    def __init__(self, returncode: int, stdout: list[str], stderr: list[str]) -> None:
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr


def _pump(stream: IO[bytes], sink: list[str], echo_to: IO[str] | None, label: str) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", errors="replace").rstrip()
        sink.append(line)
        if echo_to is not None:
            print(label, line, file=echo_to)
    stream.close()


def _stop_tree(process: subprocess.Popen[bytes]) -> None:
    """Kill the process and every process it started (its own session)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError, AttributeError):
        process.kill()
    process.wait()


def execute_subprocess_async(
    cmd: list[Any],
    env: Mapping[str, str] | None = None,
    stdin: Any = None,
    timeout: float = 180,
    quiet: bool = False,
    echo: bool = True,
) -> _RunOutput:
    """Run ``cmd``, streaming its output as it comes, and fail when it fails or hangs.

    Each line of the command is kept and, unless ``quiet``, printed as it arrives with the
    prefix ``stdout:`` or ``stderr:``. At ``timeout`` seconds the command and every process it
    started are killed.

    Args:
        cmd: The program and its arguments; ``Path`` items are turned into strings (the list
            passed in is not changed).
        env: The command's environment (default: this process's).
        stdin: What the command reads (a file object, ``subprocess.DEVNULL`` ...).
        timeout: Seconds the command may run.
        quiet: Keep the output without printing it.
        echo: Print the command before running it.

    Returns:
        An object with ``returncode``, ``stdout`` and ``stderr`` (lists of lines).

    Raises:
        RuntimeError: The command exited with a code other than 0 (or was killed by a
            signal), with its whole stderr.
        TimeoutError: The command ran past ``timeout``, with the end of its stderr.
    """
    command = [str(part) for part in cmd]
    shown = " ".join(command)
    if echo:
        print("\nRunning: ", shown)
    process = subprocess.Popen(
        command,
        env=dict(env) if env is not None else None,
        stdin=stdin,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    out: list[str] = []
    err: list[str] = []
    readers = [
        threading.Thread(
            target=_pump, args=(process.stdout, out, None if quiet else sys.stdout, "stdout:")
        ),
        threading.Thread(
            target=_pump, args=(process.stderr, err, None if quiet else sys.stderr, "stderr:")
        ),
    ]
    for reader in readers:
        reader.daemon = True
        reader.start()
    try:
        returncode = process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        _stop_tree(process)
        for reader in readers:
            reader.join(timeout=5)
        tail = "\n".join(err[-30:])
        raise TimeoutError(
            f"'{shown}' ran past its timeout of {timeout} seconds and was stopped, with the "
            "processes it started. A process that waits on a collective its peers never reach "
            "hangs like this; pass a larger timeout= if the command is only slow. The end of "
            f"its stderr:\n{tail}"
        ) from None
    for reader in readers:
        reader.join()
    if returncode != 0:
        stderr = "\n".join(err)
        raise RuntimeError(
            f"'{shown}' failed with returncode {returncode}\n\n"
            f"The combined stderr from workers follows:\n{stderr}"
        )
    return _RunOutput(returncode, out, err)


class SubprocessCallException(Exception):
    """A command run by [`run_command`][accel.test_utils.testing.run_command] failed; the
    message holds the command and its output."""


def run_command(
    command: list[Any], return_stdout: bool = False, env: Mapping[str, str] | None = None
) -> str | None:
    """Run ``command`` to its end, its stderr merged into its stdout.

    Args:
        command: The program and its arguments (``Path`` items are turned into strings).
        return_stdout: Return the command's output.
        env: The command's environment (default: this process's).

    Returns:
        The output, decoded, when ``return_stdout``; otherwise None.

    Raises:
        SubprocessCallException: The command exited with an error, with its output.
    """
    args = [str(part) for part in command]
    try:
        output = subprocess.check_output(
            args, stderr=subprocess.STDOUT, env=dict(env) if env is not None else None
        )
    except subprocess.CalledProcessError as err:
        raise SubprocessCallException(
            f"Command `{' '.join(args)}` failed with the following error:\n\n"
            f"{err.output.decode(errors='replace')}"
        ) from err
    return output.decode("utf-8", errors="replace") if return_stdout else None


def pytest_xdist_worker_id() -> int:
    """The number of this pytest-xdist worker (``gw3`` -> 3); 0 outside pytest-xdist."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "gw0")
    match = re.fullmatch(r"gw(\d+)", worker)
    return int(match.group(1)) if match else 0


def get_torch_dist_unique_port() -> int:
    """A rendezvous port for ``--master_port``: 29500 plus the pytest-xdist worker number, so
    that workers running at once do not share one."""
    return 29500 + pytest_xdist_worker_id()


def path_in_accelerate_package(*components: str) -> Path:
    """A path inside accel's installed package folder (``accelerate``'s under
    ``install_as_accelerate()``, which is the same folder).

    Args:
        *components: Parts joined after the package folder (``"test_utils", "scripts"``).

    Example:
        >>> path_in_accelerate_package("test_utils", "scripts", "test_script.py").is_file()
        True
    """
    return Path(__file__).resolve().parents[1].joinpath(*components)


__all__ = [
    "DEFAULT_LAUNCH_COMMAND",
    "SubprocessCallException",
    "execute_subprocess_async",
    "get_launch_command",
    "get_torch_dist_unique_port",
    "path_in_accelerate_package",
    "pytest_xdist_worker_id",
    "run_command",
]

"""Start a benchmark's measurements in fresh worker processes and read back what they report.

A measurement that must not share its process with the others (peak memory, a cold start, a
library that changes global state) runs in a worker: the script starts itself again with its
worker arguments (``--worker ...``), the worker prints its result as a JSON line, and the parent
reads the last such line back. Each script stays runnable alone:
``python benchmarks/<area>/bench_<what>.py --worker ...`` runs one measurement and prints it.

Example (in ``bench_<what>.py``, with ``benchmarks/`` on ``sys.path``)::

    from _workers import run_worker_process

    done = run_worker_process(__file__, "--worker", mode, folder, env={"OMP_NUM_THREADS": "1"})
    row = done.require(mode)  # the worker's JSON, or RuntimeError with its output

This module imports only the standard library, so a worker that imports it measures nothing
of it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from typing import Any


class WorkerRun:
    """What one worker process did: its exit status, its output and the result it printed."""

    __slots__ = ("command", "marker", "returncode", "stderr", "stdout")

    def __init__(self, done: subprocess.CompletedProcess[str], marker: str) -> None:
        self.command: list[str] = list(done.args)
        """The command line that started the worker."""
        self.returncode: int = done.returncode
        """Its exit status."""
        self.stdout: str = done.stdout
        """Everything it printed."""
        self.stderr: str = done.stderr
        """Everything it wrote to stderr."""
        self.marker = marker
        """Prefix of its result lines (empty: the last line of stdout is the result)."""

    def result(self) -> Any:
        """The JSON value of the worker's last result line; None when it printed none.

        With a ``marker``, the result lines are the lines of stdout that start with it (the
        marker itself is cut off), so the worker may print other lines; without, the result is
        the last line of stdout.
        """
        if self.marker:
            lines = [
                line[len(self.marker) :]
                for line in self.stdout.splitlines()
                if line.startswith(self.marker)
            ]
        else:
            lines = self.stdout.strip().splitlines()
        return json.loads(lines[-1]) if lines else None

    def require(self, what: str) -> Any:
        """The result of a worker that must succeed.

        Raises:
            RuntimeError: the worker exited with an error, naming ``what`` and followed by the
                worker's stdout and stderr.
        """
        if self.returncode != 0:
            raise RuntimeError(f"{what} failed:\n{self.stdout}\n{self.stderr}")
        return self.result()

    def error_line(self, containing: str = "", default: str | None = None) -> str:
        """The last line of stderr that holds ``containing`` (any line when empty), for a
        table cell; ``default`` (else ``exit code N``) when there is none."""
        lines = [line for line in self.stderr.strip().splitlines() if containing in line]
        if lines:
            return lines[-1]
        return default if default is not None else f"exit code {self.returncode}"


def run_worker_process(
    script: str,
    *arguments: str,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    marker: str = "",
) -> WorkerRun:
    """Run ``script`` with ``arguments`` in a fresh interpreter (this one's) and wait for it.

    Args:
        script: The script to start, usually the caller's ``__file__``.
        *arguments: Its command line arguments (``"--worker", mode, folder``).
        env: Variables set for the worker on top of this process's environment.
        timeout: Seconds the worker may take; ``subprocess.TimeoutExpired`` past it.
        marker: Prefix of the lines that carry its result (see :meth:`WorkerRun.result`).

    Returns:
        The finished worker; a failed one is returned too (see :meth:`WorkerRun.require`).
    """
    done = subprocess.run(
        [sys.executable, script, *arguments],
        capture_output=True,
        text=True,
        env=None if env is None else {**os.environ, **env},
        timeout=timeout,
        check=False,
    )
    return WorkerRun(done, marker)

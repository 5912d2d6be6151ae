"""Ctrl-C (SIGINT) on `accel launch` and `accel config`: one line, every process stopped, exit
code 130."""

import os
import re
import select
import signal
import subprocess
import sys
import time

import pytest

from .conftest import SCRIPTS, sigint_default


class Started:
    """A command run in its own session, read as it goes; the group is killed on exit."""

    def __init__(self, args: list[str], **kwargs):
        self.proc = subprocess.Popen(
            args,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=sigint_default,
            **kwargs,
        )
        self.output = ""
        self.pids: list[int] = []

    def __enter__(self) -> "Started":
        return self

    def __exit__(self, *exc) -> None:
        for pid in [self.proc.pid, *self.pids]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        self.proc.wait(timeout=30)

    def read_until(self, text: str, count: int = 1, timeout: float = 240) -> str:
        """Read stdout until ``text`` appeared ``count`` times."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while self.output.count(text) < count:
            left = deadline - time.monotonic()
            if left <= 0 or self.proc.poll() is not None:
                raise AssertionError(f"never saw {text!r} x{count}; stdout so far:\n{self.output}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                self.output += os.read(fd, 4096).decode(errors="replace")
        return self.output

    def interrupt(self, timeout: float = 90) -> tuple[int, str]:
        """Send SIGINT to the command alone; return its exit code and stderr."""
        self.proc.send_signal(signal.SIGINT)
        code = self.proc.wait(timeout=timeout)
        return code, self.proc.stderr.read().decode(errors="replace")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _gone(pids: list[int], timeout: float = 30) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)
    return True


@pytest.mark.multiprocess
@pytest.mark.timeout(400)
@pytest.mark.parametrize("processes", [1, 2])
def test_ctrl_c_on_launch_stops_every_process_with_one_line(processes):
    command = [sys.executable, "-m", "accel_launch.cli", "launch", "--num_processes"]
    with Started([*command, str(processes), str(SCRIPTS / "sleep_forever.py")]) as job:
        out = job.read_until("PID ", count=processes)
        job.pids = [int(pid) for pid in re.findall(r"PID (\d+)", out)]
        assert len(job.pids) == processes, out
        code, err = job.interrupt()
        assert code == 130, err
        assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
        lines = [line for line in err.splitlines() if not line.startswith("accel launch: 2 proc")]
        assert lines == [
            "accel launch: interrupted (Ctrl-C); every process it started was stopped."
        ], err
        assert _gone(job.pids), f"still running: {[p for p in job.pids if _alive(p)]}"


@pytest.mark.timeout(200)
@pytest.mark.parametrize("answered", [0, 2])
def test_ctrl_c_in_the_questionnaire_writes_nothing(tmp_path, answered):
    target = tmp_path / "config.yaml"
    env = {**os.environ, "PATH": "/usr/bin:/bin"}
    args = [sys.executable, "-m", "accel_launch.cli", "config", "--config_file", str(target)]
    with Started(args, stdin=subprocess.PIPE, env=env) as job:
        for answer in ["2", "1"][:answered]:  # multi-CPU, one machine: then it waits
            job.proc.stdin.write(f"{answer}\n".encode())
            job.proc.stdin.flush()
        job.read_until("]: ", count=answered + 1)
        code, err = job.interrupt()
    assert code == 130
    assert err.strip() == "accel config: interrupted (Ctrl-C); nothing was written.", err
    assert not target.exists()

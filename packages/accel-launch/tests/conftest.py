import json
import os
import signal
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

SCRIPTS = Path(__file__).parent / "scripts"
OPEN_MPI_ENV = {
    "OMPI_ALLOW_RUN_AS_ROOT": "1",
    "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1",
    "OMPI_MCA_btl": "self,tcp",
}
"""What Open MPI needs to start local ranks here (as root, over TCP)."""


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path, monkeypatch):
    """Each test gets its own default-config folder."""
    home = tmp_path / "config-home"
    monkeypatch.setenv("ACCEL_CONFIG_HOME", str(home))
    # A reference config file on the machine running the tests must not add notices.
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    return home


def accel(*args: str, timeout: float = 120, check: bool = True, env=None):
    """Run the ``accel`` command as a user would (a subprocess)."""
    command = [sys.executable, "-m", "accel_launch.cli", *args]
    return run_command(command, timeout=timeout, check=check, env={**os.environ, **(env or {})})


def reports(stdout: str) -> list[dict]:
    rows = [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("REPORT ")]
    return sorted(rows, key=lambda r: r["process_index"])


def sigint_default() -> None:
    """Gives a child the default Ctrl-C (a ``preexec_fn``): a process started with SIGINT ignored,
    as a background job of a non-interactive shell is, passes that on to its children, and a
    Python started so never raises ``KeyboardInterrupt``. Tests that press Ctrl-C need the
    disposition a person at a terminal has, whatever started the test run."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Terminal:
    """Runs a command in a pseudo-terminal and talks to it like a person at the keyboard."""

    def __init__(self, args: list[str], env: dict[str, str]):
        import pty
        import subprocess

        self.master, slave = pty.openpty()
        self.proc = subprocess.Popen(
            args,
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=env,
            start_new_session=True,
            preexec_fn=sigint_default,
        )
        os.close(slave)
        self.output = ""
        self.seen = 0

    def expect(self, text: str, timeout: float = 60) -> str:
        """Wait until ``text`` appears after what was already matched; return the output."""
        import select
        import time

        deadline = time.monotonic() + timeout
        while text not in self.output[self.seen :]:
            left = deadline - time.monotonic()
            if left <= 0:
                self.proc.kill()
                raise AssertionError(f"never saw {text!r}; output so far:\n{self.output}")
            ready, _, _ = select.select([self.master], [], [], min(left, 1.0))
            if ready:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk and self.proc.poll() is not None:
                    raise AssertionError(f"exited before {text!r}; output:\n{self.output}")
                self.output += chunk.decode(errors="replace")
        self.seen = self.output.index(text, self.seen) + len(text)
        return self.output

    def send(self, keys: str) -> None:
        os.write(self.master, keys.encode())

    def answer(self, prompt: str, keys: str) -> None:
        """Wait for ``prompt``, then type ``keys``."""
        self.expect(prompt)
        self.send(keys)

    def finish(self, timeout: float = 60) -> int:
        import select

        code = self.proc.wait(timeout=timeout)
        while True:
            ready, _, _ = select.select([self.master], [], [], 0.2)
            if not ready:
                break
            try:
                chunk = os.read(self.master, 4096)
            except OSError:
                break
            if not chunk:
                break
            self.output += chunk.decode(errors="replace")
        os.close(self.master)
        return code

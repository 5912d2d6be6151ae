"""The console scripts end quickly once torch is loaded (no teardown of every module), keeping
the exit code, what was printed and the exit functions."""

import subprocess
import sys
from pathlib import Path


def _exit_with(*lines: str) -> subprocess.CompletedProcess[str]:
    """Run ``lines`` in a fresh interpreter with torch loaded, then ``exit_with``."""
    code = "\n".join(["import torch", "from accel_launch.cli import exit_with", *lines])
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)


def test_exit_with_runs_exit_functions_flushes_and_keeps_the_code():
    # With torch loaded and no other thread, the process ends without tearing its modules
    # down; what it printed and its exit functions are kept.
    result = _exit_with(
        "import atexit",
        "atexit.register(lambda: print('exit function ran'))",
        "print('unflushed', end='')",
        "exit_with(5)",
    )
    assert result.returncode == 5, result.stderr
    assert result.stdout == "unflushedexit function ran\n", result.stdout


def test_exit_with_waits_for_a_running_thread():
    result = _exit_with(
        "import threading, time",
        "threading.Thread(target=lambda: (time.sleep(0.5), print('thread done'))).start()",
        "exit_with(0)",
    )
    assert result.returncode == 0 and result.stdout == "thread done\n", result


def test_the_console_script_keeps_the_script_exit_code_and_output(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("print('from the worker')\nraise SystemExit(3)\n")
    launcher = Path(sys.executable).with_name("accel-launch")
    result = subprocess.run(
        [str(launcher), "--quiet", "--num_processes", "1", str(script)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 3, result.stderr
    assert "from the worker" in result.stdout

"""benchmarks/_workers.py: a benchmark starts its measurements in fresh worker processes and
reads back the result each prints; a failed worker is reported with its output. Real processes,
no benchmark runs here."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = (
    "bigmodel/bench_load.py",
    "bigmodel/bench_offload_cold.py",
    "checkpoint_integrity/bench_checksum.py",
    "checkpointing/bench_async_save.py",
    "checkpointing/bench_save_load.py",
    "precision/bench_fp8_step.py",
    "precision/bench_quantized_load.py",
)
"""The scripts that start their own workers."""


def _workers() -> ModuleType:
    spec = importlib.util.spec_from_file_location("_workers", ROOT / "benchmarks" / "_workers.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


workers = _workers()

WORKER = """\
import json, os, sys
mode = sys.argv[1]
print("starting", mode)
if mode == "marked":
    print("RESULT " + json.dumps({"n": 1}))
    print("RESULT " + json.dumps({"n": 2, "env": os.environ.get("BENCH_X")}))
    print("done")
elif mode == "plain":
    print(json.dumps({"env": os.environ.get("BENCH_X"), "args": sys.argv[2:]}))
else:
    print("a line on stderr", file=sys.stderr)
    print("ValueError: the worker refused", file=sys.stderr)
    print("cleanup", file=sys.stderr)
    sys.exit(3)
"""


@pytest.fixture
def script(tmp_path: Path) -> str:
    path = tmp_path / "worker.py"
    path.write_text(WORKER, encoding="utf-8")
    return str(path)


def test_the_last_line_is_the_result_and_env_is_added(script: str) -> None:
    done = workers.run_worker_process(script, "plain", "a", "b", env={"BENCH_X": "7"}, timeout=60)
    assert done.returncode == 0
    assert done.command == [sys.executable, script, "plain", "a", "b"]
    assert done.require("plain") == {"env": "7", "args": ["a", "b"]}


def test_a_marker_picks_the_last_marked_line(script: str) -> None:
    done = workers.run_worker_process(script, "marked", timeout=60, marker="RESULT ")
    assert done.result() == {"n": 2, "env": None}


def test_a_failed_worker_is_reported_with_its_output(script: str) -> None:
    done = workers.run_worker_process(script, "fail", timeout=60, marker="RESULT ")
    assert done.returncode == 3
    assert done.result() is None
    assert done.error_line() == "cleanup"
    assert done.error_line("Error") == "ValueError: the worker refused"
    assert done.error_line("Nothing like it") == "exit code 3"
    assert done.error_line("Nothing like it", default="failed") == "failed"
    with pytest.raises(RuntimeError, match=r"(?s)save failed:\nstarting fail\n.*refused"):
        done.require("save")


def test_a_worker_past_its_timeout_is_stopped(script: str, tmp_path: Path) -> None:
    slow = tmp_path / "slow.py"
    slow.write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    with pytest.raises(subprocess.TimeoutExpired):
        workers.run_worker_process(str(slow), timeout=1)


@pytest.mark.parametrize("name", SCRIPTS)
def test_each_script_starts_its_workers_through_the_helper(name: str) -> None:
    source = (ROOT / "benchmarks" / name).read_text(encoding="utf-8")
    assert "run_worker_process(" in source
    assert "[sys.executable, __file__" not in source, (
        f"benchmarks/{name} starts a worker by hand; use _workers.run_worker_process"
    )


@pytest.mark.parametrize("name", [s for s in SCRIPTS if s != "bigmodel/bench_offload_cold.py"])
def test_each_script_still_runs_alone(name: str) -> None:
    """From another folder, with nothing on ``sys.path``: ``--help`` imports the script and its
    helpers. (bench_offload_cold.py has no ``--help``: any other argument runs it whole.)"""
    done = subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / name), "--help"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT / "packages",
    )
    assert done.returncode == 0, done.stderr
    assert "usage" in done.stdout

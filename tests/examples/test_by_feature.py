"""The ``examples/by_feature`` scripts run through the real launcher on 2 processes.

To keep CI short, the scripts that need no launcher flags run in one launch of
``run_by_feature.py`` (each script's ``main`` in turn, the shared state reset between them);
FSDP and DeepSpeed run as scripts, each with its launcher flags. What each test checks is what
the script demonstrates: a resumed run ends with the weights of the uninterrupted one,
accumulation trains like a larger batch, gathered metrics count each sample once, every
process stops at the same step, and so on.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from accel_state.testing import free_port, run_command

ROOT = Path(__file__).resolve().parents[2]
FEATURES = ROOT / "examples" / "by_feature"
DRIVER = Path(__file__).parent / "run_by_feature.py"
SCRIPTS = [
    "checkpointing",
    "tracking",
    "gradient_accumulation",
    "automatic_gradient_accumulation",
    "memory",
    "multi_process_metrics",
    "cross_validation",
    "early_stopping",
    "profiler",
    "local_sgd",
    "fsdp_with_peak_mem_tracking",
    "deepspeed_with_config_support",
    "big_model_inference",
    "pipeline_inference",
]
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)


def _launch(*args: str, cwd: Path) -> str:
    command = [sys.executable, "-m", "accel_launch.cli", "launch", "--quiet"]
    command += ["--num_processes", "2", "--main_process_port", str(free_port())]
    env = {"TORCH_EXTENSIONS_DIR": EXTENSIONS}
    return run_command([*command, *args], timeout=600, env=env, cwd=cwd).stdout


def _results(folder: Path) -> dict[tuple[str, int], dict[str, Any]]:
    found = {}
    for path in folder.glob("*.json"):
        case, rank = path.stem.rsplit(".", 1)
        found[case, int(rank)] = json.loads(path.read_text())
    return found


def test_readme_lists_every_script_with_its_command():
    readme = (FEATURES / "README.md").read_text()
    for script in SCRIPTS:
        assert (FEATURES / f"{script}.py").is_file(), script
        assert f"[`{script}.py`]({script}.py)" in readme, script
        assert f"examples/by_feature/{script}.py" in readme, script
    assert (FEATURES / "deepspeed_config.json").is_file()


LEARNED = 0.85
"""The accuracy every training script reaches on the toy task's 101 evaluation samples: a
guess scores about 0.5 (51 of the 101 are in the larger class)."""


def _check_training_scripts(results: dict[tuple[str, int], dict[str, Any]], tmp: Path) -> None:
    def main(case: str) -> dict[str, Any]:
        return results[case, 0]

    full, resumed = main("checkpointing"), main("checkpointing_resumed")
    assert full["steps"] == resumed["steps"] == 32, (full, resumed)
    assert resumed["checksum"] == full["checksum"], (full, resumed)
    assert resumed["accuracy"] == full["accuracy"], (full, resumed)
    assert (tmp / "checkpointing" / "step_30").is_dir()

    accumulated, plain = main("gradient_accumulation"), main("gradient_accumulation_none")
    assert accumulated["optimizer_steps"] == plain["optimizer_steps"] == 8
    assert accumulated["checksum"] == pytest.approx(plain["checksum"], rel=1e-5, abs=1e-4)
    limited = main("automatic_gradient_accumulation")
    unlimited = main("automatic_gradient_accumulation_none")
    assert (limited["batch_size"], limited["accumulation_steps"]) == (8, 4)
    assert (unlimited["batch_size"], unlimited["accumulation_steps"]) == (32, 1)
    assert limited["checksum"] == pytest.approx(unlimited["checksum"], rel=1e-5, abs=1e-4)
    assert main("memory")["tried"] == [64, 32, 16]
    # Each training script's printed result shows that the model learned the task.
    for case in (
        "checkpointing",
        "tracking",
        "gradient_accumulation",
        "gradient_accumulation_none",
        "automatic_gradient_accumulation",
        "automatic_gradient_accumulation_none",
        "memory",
        "multi_process_metrics",
        "local_sgd",
    ):
        assert main(case)["accuracy"] > LEARNED, (case, main(case))
    assert all(results["early_stopping", rank]["accuracy"] > LEARNED for rank in (0, 1))
    profiled = main("profiler")
    assert profiled["accuracy"] > profiled["accuracy_before"], profiled  # 5 steps help

    for rank in (0, 1):
        metrics = results["multi_process_metrics", rank]
        assert metrics["count"] == metrics["distinct"] == 101, metrics
    folds = main("cross_validation")
    assert folds["validated"] == 240 and folds["test_samples"] == 101, folds
    assert len(folds["fold_accuracies"]) == 3
    assert min(folds["fold_accuracies"]) > LEARNED and folds["ensemble_accuracy"] > LEARNED, folds

    stops = [results["early_stopping", rank] for rank in (0, 1)]
    assert stops[0]["step"] == stops[1]["step"], stops  # the same step on every process
    assert all(stop["stopped"] and stop["step"] < stop["planned"] for stop in stops), stops
    assert any(stop["triggered"] for stop in stops), stops  # one process's loss decided

    spreads = main("local_sgd")
    assert spreads["largest_spread"] > 0, spreads  # replicas drift between averagings
    assert spreads["final_spread"] == 0, spreads  # and agree once the context exits


def _check_tracking(result: dict[str, Any], logs: Path) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    assert result["logged"] == 2, result
    runs = [path.parent for path in logs.rglob("events.out.tfevents.*")]
    assert len(set(runs)) == 1, runs  # one run, written by the main process only
    events = EventAccumulator(str(runs[0])).Reload()
    accuracy = events.Scalars("accuracy")
    assert [event.step for event in accuracy] == [0, 1]
    assert accuracy[-1].value == pytest.approx(result["accuracy"], abs=1e-6)


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_scripts_without_launcher_flags_on_two_processes(tmp_path):
    pytest.importorskip("tensorboard", reason="the tracking example logs to TensorBoard")
    out = _launch(str(DRIVER), str(tmp_path), cwd=tmp_path)
    results = _results(tmp_path / "results")
    assert len(results) == 2 * 15, (sorted(results), out)

    _check_training_scripts(results, tmp_path)
    _check_tracking(results["tracking", 0], tmp_path / "tracking")

    for rank in (0, 1):
        trace = (tmp_path / "profile" / f"trace_rank_{rank}.json").read_text()
        assert "ProfilerStep#" in trace and "aten::" in trace

    big = results["big_model_inference", 0]
    assert set(big["placement"]) == {"cpu", "disk"}, big  # part of the model is offloaded
    assert big["answers"] == 10 and big["difference"] <= 1e-6, big
    pipe = [results["pipeline_inference", rank] for rank in (0, 1)]
    # 2 stages, cut between two blocks (no_split_module_classes=["Block"])
    assert len(pipe[0]["split_points"]) == 1, pipe
    assert re.fullmatch(r"blocks\.\d", pipe[0]["split_points"][0]), pipe
    assert max(p["difference"] for p in pipe) <= 1e-5, pipe
    assert "resumed from" in out and "step 10" in out


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_fsdp_with_peak_mem_tracking_on_two_processes(tmp_path):
    pytest.importorskip("psutil", reason="the example reads the CPU's resident memory")
    script = FEATURES / "fsdp_with_peak_mem_tracking.py"
    out = _launch("--use_fsdp", "--fsdp_version", "2", str(script), cwd=tmp_path)
    epochs = re.findall(r"epoch \d: memory at start ([\d.]+) MB, peak ([\d.]+) MB", out)
    assert len(epochs) == 2, out
    assert all(float(peak) >= float(start) > 0 for start, peak in epochs), epochs
    found = re.search(r"fsdp: FSDP on 2 processes, this process holds (\d+) of (\d+)", out)
    assert found, out
    held, total = int(found.group(1)), int(found.group(2))
    assert held <= total // 2 + 64, (held, total)  # sharded: about half each
    assert float(out.rsplit("accuracy ", 1)[1].split()[0]) > LEARNED, out


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="needs deepspeed: pip install 'accel[deepspeed]'",
)
def test_deepspeed_with_config_file_on_two_processes(tmp_path):
    out = _launch(
        "--use_deepspeed",
        "--deepspeed_config_file",
        str(FEATURES / "deepspeed_config.json"),
        str(FEATURES / "deepspeed_with_config_support.py"),
        cwd=tmp_path,
    )
    assert (
        "deepspeed: DEEPSPEED, ZeRO stage 2, optimizer from DeepSpeed config, "
        "scheduler from DeepSpeed config" in out
    ), out
    warmup = json.loads(re.search(r"warm-up learning rates (\[[^\]]*\])", out).group(1))
    # WarmupLR climbs over the 5 warm-up steps to the script's --lr, filled into "auto".
    assert warmup == sorted(warmup) and warmup[0] < warmup[-1] == 0.01, warmup
    assert float(out.rsplit("accuracy ", 1)[1].split()[0]) > LEARNED, out


def test_tracking_without_with_tracking_says_it_is_off_and_how_to_turn_it_on(tmp_path):
    script = FEATURES / "tracking.py"
    command = [sys.executable, str(script), "--cpu", "--num_epochs", "1"]
    out = run_command([*command, "--project_dir", "runs"], timeout=300, cwd=tmp_path).stdout
    assert "logged 0 epochs to none" not in out, out
    assert (
        "tracking: off, nothing was logged; pass --with_tracking to log each epoch to "
        "tensorboard under runs" in out
    ), out
    assert not (tmp_path / "runs").exists()

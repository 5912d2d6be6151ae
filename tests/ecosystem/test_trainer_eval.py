"""transformers' ``Trainer.evaluate`` on accel against the reference's same run: 66 samples in
batches of 8, from an ``IterableDataset`` without a length and from a map-style dataset, on one
process and on two. The Trainer gathers each batch's loss repeated to the batch size and relies
on ``gather_for_metrics`` to cut the last batch to its real samples."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = str(Path(__file__).parent / "scripts" / "trainer_eval_run.py")


@pytest.mark.slow
@pytest.mark.parametrize("kind", [[], ["--map"]], ids=["iterable", "map"])
def test_eval_loss_on_one_process_is_the_references(
    tmp_path: Path, eco: SimpleNamespace, kind: list[str]
) -> None:
    eco.require("transformers", "accelerate")
    ours = eco.run([sys.executable, SCRIPT, str(tmp_path / "a"), *kind], as_accelerate=True)
    theirs = eco.run([sys.executable, SCRIPT, str(tmp_path / "r"), *kind], as_accelerate=False)
    assert "/accel/" in ours["accelerate_file"], ours["accelerate_file"]
    assert ours["eval_loss"] == theirs["eval_loss"]
    assert ours["eval_loss"] == pytest.approx(ours["exact"], rel=1e-6)


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.parametrize("kind", [[], ["--map"]], ids=["iterable", "map"])
def test_eval_loss_on_two_processes_is_the_references(
    tmp_path: Path, eco: SimpleNamespace, kind: list[str]
) -> None:
    eco.require("transformers", "accelerate")
    ours = eco.run(
        [
            *eco.LAUNCH,
            "--as_accelerate",
            "--cpu",
            "--num_processes",
            "2",
            SCRIPT,
            str(tmp_path / "a"),
            *kind,
        ],
        as_accelerate=False,
    )
    theirs = eco.run(
        [*eco.TORCHRUN, "--nproc_per_node", "2", SCRIPT, str(tmp_path / "r"), *kind],
        as_accelerate=False,
    )
    assert ours["num_processes"] == theirs["num_processes"] == 2
    assert ours["eval_loss"] == theirs["eval_loss"]


@pytest.mark.slow
def test_memory_metrics_are_recorded_as_with_the_reference(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    # transformers records them only when psutil is installed: accel-torch requires it, as the
    # reference does (packages/accel/tests/test_dependencies.py pins it).
    eco.require("transformers", "accelerate")
    ours = eco.run([sys.executable, SCRIPT, str(tmp_path / "a"), "--memory"], as_accelerate=True)
    theirs = eco.run([sys.executable, SCRIPT, str(tmp_path / "r"), "--memory"], as_accelerate=False)
    assert ours["memory_keys"] == theirs["memory_keys"]
    assert "eval_mem_cpu_alloc_delta" in ours["memory_keys"]

"""transformers' ``Trainer`` on accel, against the reference's same run: train, evaluate, save,
resume from a checkpoint, on one process and on two; and ``Trainer`` on a PEFT LoRA model.

Each side runs ``scripts/trainer_run.py`` in a fresh interpreter: accel through
``ACCEL_AS_ACCELERATE=1`` (``accel launch --as_accelerate`` for two processes), the reference
with the switch off (torchrun for two processes). Same seed, same torch: the losses are equal.
"""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = str(Path(__file__).parent / "scripts" / "trainer_run.py")


def _check(ours: dict, reference: dict, processes: int) -> None:
    assert "/accel/" in ours["accelerate_file"], ours["accelerate_file"]
    assert "site-packages/accelerate/" in reference["accelerate_file"]
    assert ours["num_processes"] == reference["num_processes"] == processes
    assert len(ours["losses"]) == 6
    assert ours["losses"] == reference["losses"]
    assert ours["eval_loss"] == reference["eval_loss"]
    # The resumed run logs the checkpoint's history, then the last three steps again: the same.
    assert ours["resumed_losses"][-3:] == reference["resumed_losses"][-3:] == ours["losses"][-3:]
    assert ours["saved"] == reference["saved"]


@pytest.mark.slow
def test_trainer_on_one_process_matches_the_reference(tmp_path: Path, eco: SimpleNamespace) -> None:
    eco.require("transformers", "accelerate")
    ours = eco.run([sys.executable, SCRIPT, str(tmp_path / "accel")], as_accelerate=True)
    reference = eco.run([sys.executable, SCRIPT, str(tmp_path / "reference")], as_accelerate=False)
    _check(ours, reference, 1)


@pytest.mark.slow
@pytest.mark.multiprocess
def test_trainer_on_two_processes_matches_the_reference(
    tmp_path: Path, eco: SimpleNamespace
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
        ],
        as_accelerate=False,  # the flag alone turns the switch on in the processes
    )
    reference = eco.run(
        [*eco.TORCHRUN, "--nproc_per_node", "2", SCRIPT, str(tmp_path / "reference")],
        as_accelerate=False,
    )
    _check(ours, reference, 2)


@pytest.mark.slow
def test_trainer_on_a_peft_lora_model_matches_the_reference(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    eco.require("transformers", "peft", "accelerate")
    ours = eco.run([sys.executable, SCRIPT, str(tmp_path / "a"), "--peft"], as_accelerate=True)
    reference = eco.run(
        [sys.executable, SCRIPT, str(tmp_path / "r"), "--peft"], as_accelerate=False
    )
    _check(ours, reference, 1)
    assert "adapter_model.safetensors" in ours["saved"]

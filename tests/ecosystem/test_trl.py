"""TRL's ``SFTTrainer`` a few steps on accel, against the reference's same run."""

from __future__ import annotations

import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SCRIPT = str(Path(__file__).parent / "scripts" / "sft_run.py")


@pytest.mark.slow
def test_sft_trainer_matches_the_reference(tmp_path: Path, eco: SimpleNamespace) -> None:
    eco.require("trl", "datasets", "accelerate")
    ours = eco.run([sys.executable, SCRIPT, str(tmp_path / "a")], as_accelerate=True)
    reference = eco.run([sys.executable, SCRIPT, str(tmp_path / "r")], as_accelerate=False)
    assert "/accel/" in ours["accelerate_file"]
    assert "site-packages/accelerate/" in reference["accelerate_file"]
    assert len(ours["losses"]) == 4
    assert ours["losses"] == reference["losses"]

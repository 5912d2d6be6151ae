"""transformers' ``Trainer`` with FSDP and with DeepSpeed on 2 CPU processes (gloo), against the
reference's same run: train, checkpoint mid-run, resume from the checkpoint.

Each side runs ``scripts/trainer_engine_run.py`` once for all its engines: accel through
``accel launch --as_accelerate``, the reference through its own launcher with the switch off
(``--multi_gpu``: its ``--cpu`` starts one process). The reference runs no FSDP on CPU (its
``Accelerator`` keeps a CPU run on DDP), so the FSDP losses are compared with its DDP run of the
same script: FSDP computes the same steps, and the losses are equal.

DeepSpeed's CPU ops are compiled on first use (minutes): ``TORCH_EXTENSIONS_DIR`` keeps them
(``~/.cache/accel/torch_extensions`` unless set).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from accel_state.testing import free_port

SCRIPT = str(Path(__file__).parent / "scripts" / "trainer_engine_run.py")
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)
DEEPSPEED_CONFIGS = ("ds-auto", "ds-explicit", "ds-no-optimizer")


def _both(
    eco: SimpleNamespace, tmp_path: Path, engines: tuple[str, ...], timeout: float
) -> tuple[dict[str, Any], dict[str, Any]]:
    ours = eco.run(
        [
            *eco.LAUNCH,
            "--as_accelerate",
            "--cpu",
            "--num_processes",
            "2",
            "--main_process_port",
            str(free_port()),
            SCRIPT,
            str(tmp_path / "accel"),
            *engines,
        ],
        as_accelerate=False,  # the flag alone turns the switch on in the processes
        timeout=timeout,
    )
    reference = eco.run(
        [
            sys.executable,
            "-m",
            "accelerate.commands.launch",
            "--multi_gpu",
            "--num_processes",
            "2",
            "--num_machines",
            "1",
            "--mixed_precision",
            "no",
            "--dynamo_backend",
            "no",
            "--main_process_port",
            str(free_port()),
            SCRIPT,
            str(tmp_path / "reference"),
            *engines,
        ],
        as_accelerate=False,
        timeout=timeout,
    )
    assert "/accel/" in ours["accelerate_file"], ours["accelerate_file"]
    assert "site-packages/accelerate/" in reference["accelerate_file"]
    return ours, reference


def _same_run(ours: dict[str, Any], reference: dict[str, Any]) -> None:
    assert ours["num_processes"] == reference["num_processes"] == 2
    assert len(ours["losses"]) == 4
    assert ours["losses"] == reference["losses"]
    # The resumed run logs the checkpoint's two steps, then the last two again: the same.
    assert ours["resumed_losses"] == reference["resumed_losses"] == ours["losses"]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.timeout(900)
def test_trainer_with_fsdp_checkpoints_resumes_and_matches_the_reference(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    eco.require("transformers", "accelerate")
    ours, reference = _both(eco, tmp_path, ("fsdp",), timeout=420)
    ours, reference = ours["fsdp"], reference["fsdp"]
    assert ours["distributed_type"] == "FSDP"
    # transformers finds the optimizer and scheduler of an FSDP checkpoint by these names.
    assert {"optimizer.bin", "pytorch_model_fsdp_0.safetensors"} <= set(ours["checkpoint"])
    _same_run(ours, reference)
    assert ours["saved"] == reference["saved"]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.timeout(1800)
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="needs deepspeed: pip install 'accel-torch[deepspeed]'",
)
def test_trainer_with_deepspeed_finishes_for_each_config_and_matches_the_reference(
    tmp_path: Path, eco: SimpleNamespace, monkeypatch: pytest.MonkeyPatch
) -> None:
    eco.require("transformers", "accelerate")
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", EXTENSIONS)
    ours, reference = _both(eco, tmp_path, DEEPSPEED_CONFIGS, timeout=840)
    for config in DEEPSPEED_CONFIGS:
        assert ours[config]["distributed_type"] == reference[config]["distributed_type"]
        assert ours[config]["distributed_type"] == "DEEPSPEED"
        _same_run(ours[config], reference[config])

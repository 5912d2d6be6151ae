"""The launcher's engine flags reach the Accelerator of a script that names no plugin:
``accel-launch --use_deepspeed`` / ``--use_fsdp`` on 2 real processes."""

import importlib.util
import os
import shutil
import sys
from pathlib import Path

import pytest
from accel_state.testing import free_port, run_command

SCRIPT = Path(__file__).parent / "scripts" / "engine_from_launcher.py"
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)


def _launch(*flags: str) -> str:
    launcher = shutil.which("accel-launch") or str(Path(sys.executable).parent / "accel-launch")
    command = [launcher, "--num_processes", "2", "--main_process_port", str(free_port())]
    result = run_command(
        [*command, *flags, str(SCRIPT)], timeout=600, env={"TORCH_EXTENSIONS_DIR": EXTENSIONS}
    )
    return result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
@pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="needs deepspeed: pip install 'accel-torch[deepspeed]'",
)
def test_use_deepspeed_flags_pick_the_engine():
    out = _launch("--use_deepspeed", "--zero_stage", "3", "--gradient_accumulation_steps", "2")
    assert "RESULT type=DEEPSPEED processes=2 accumulation=2 zero_stage=3 decreased=True" in out


@pytest.mark.multiprocess
@pytest.mark.timeout(700)
def test_use_fsdp_flag_picks_the_engine():
    out = _launch("--use_fsdp", "--fsdp_version", "2")
    assert "RESULT type=FSDP processes=2 accumulation=1 decreased=True" in out

"""TRL's command line on accel: ``trl sft`` goes through ``accelerate launch`` (TRL's CLI imports
``accelerate.commands.launch.launch_command`` and ``launch_command_parser``), which the switch
answers with accel's launcher; the launched ``trl/scripts/sft.py`` then trains on accel.

Offline: a tiny model and tokenizer built from a config and saved to a folder, and a local
JSON-lines dataset (``scripts/trl_cli_setup.py``). One CPU process.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

SETUP = str(Path(__file__).parent / "scripts" / "trl_cli_setup.py")


@pytest.mark.slow
@pytest.mark.timeout(900)  # two interpreters loading transformers and TRL: ~1 min of CPU
def test_trl_sft_command_line_launches_through_accel(tmp_path: Path, eco: SimpleNamespace) -> None:
    eco.require("trl", "datasets")
    eco.run([sys.executable, SETUP, str(tmp_path)], as_accelerate=True)
    trl = Path(sys.executable).with_name("trl")
    assert trl.exists(), f"the trl command is not installed beside {sys.executable}"
    env = eco.environment(True)
    env["PYTHONPROFILEIMPORTTIME"] = "1"  # every process lists what it imports, on stderr
    # fmt: off
    argv = [
        str(trl), "sft",
        "--model_name_or_path", str(tmp_path / "model"),
        "--dataset_name", str(tmp_path / "data"),
        "--output_dir", str(tmp_path / "out"),
        "--max_steps", "2", "--per_device_train_batch_size", "2", "--max_length", "32",
        "--use_cpu", "--report_to", "none", "--save_strategy", "no",
        "--logging_steps", "1", "--disable_tqdm", "true",
    ]
    # fmt: on
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    imports = [line for line in done.stderr.splitlines() if line.startswith("import time:")]
    output = done.stdout + "\n".join(x for x in done.stderr.splitlines() if x not in imports)
    assert done.returncode == 0, output[-6000:]
    names = [line.rsplit("|", 1)[-1].strip() for line in imports]
    # The CLI process got accel's launcher for `accelerate.commands.launch` ...
    assert "accelerate.commands.launch" in names and "accel_launch" in names
    # ... and both it and the launched training script run on accel: each imported accel's
    # state package (with the switch off, nothing imports it).
    assert names.count("accel_state") == 2, names.count("accel_state")
    losses = re.findall(r"'loss': '([0-9.]+)'", done.stdout)
    assert len(losses) == 2, output[-6000:]
    assert os.path.exists(tmp_path / "out" / "model.safetensors")

"""accel on torch_xla's CPU device (PJRT_DEVICE=CPU), in the environment of tools/xla_env.py.

torch_xla pins its own torch, so these tests run only there; the workspace skips them with the
reason. One launch holds every check (its start-up, importing torch_xla, is the slow part):
``accel launch --tpu`` spawns the script's function through torch_xla (PJRT multiprocess).
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

if importlib.util.find_spec("torch_xla") is None:
    pytest.skip("torch_xla is not installed: run tools/xla_env.py", allow_module_level=True)

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.mark.timeout(600)
def test_launch_tpu_training_loader_and_collectives_on_the_xla_cpu_device() -> None:
    env = {**os.environ, "PJRT_DEVICE": "CPU", "TPU_SKIP_MDS_QUERY": "1"}
    launch = [sys.executable, "-m", "accel_launch.cli", "launch", "--tpu"]
    launch += ["--main_training_function", "run_checks", str(SCRIPTS / "xla_training.py")]
    result = run_command(launch, timeout=540, env=env)
    lines = result.stdout.splitlines()
    assert "launched by: XLA ordinal 0" in lines  # xmp.spawn ran the named function
    assert "detection: XLA xla:0" in lines
    assert any(line.startswith("loader: MpDeviceLoaderWrapper(") for line in lines)
    assert "training: 4 steps match plain torch" in lines
    assert "collectives: gather [1.0, 2.0] reduce [1.0, 2.0]" in lines
    assert lines[-1] == "XLA CHECKS PASSED"

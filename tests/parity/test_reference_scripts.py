"""The reference's own 2-process check scripts, run unchanged through ``accel launch``.

``accelerate/test_utils/scripts/test_script.py`` (state, splitting, RNG, data loaders, training
against a one-process run, triggers, state reset), ``test_ops.py`` (gather, broadcast, pad,
reduce ...) and ``test_sync.py`` (gradient synchronisation and accumulation) are read from the
installed reference (the ``bench`` group); every ``accelerate.*`` import they make is served by
accel through the reference suite's finder (``tests/parity/reference_suite/site``).
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

SITE = Path(__file__).parent / "reference_suite" / "site"
TIMEOUT_S = 600


def _reference_package() -> Path:
    spec = importlib.util.find_spec("accelerate")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("the reference library is not installed (uv sync --group bench)")
    return Path(next(iter(spec.submodule_search_locations)))


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.parametrize("script", ["test_script.py", "test_ops.py", "test_sync.py"])
def test_reference_script_passes_through_accel_launch_on_two_processes(script: str) -> None:
    package = _reference_package()
    path = package / "test_utils" / "scripts" / script
    env = dict(os.environ, PYTHONPATH=str(SITE), ACCEL_REFERENCE_SRC=str(package.parent))
    command = [sys.executable, "-m", "accel_launch.cli", "launch", "--cpu", "--num_processes"]
    result = subprocess.run(
        [*command, "2", str(path)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        check=False,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-8000:]
    assert "2 processes on 1 machine" in result.stdout + result.stderr

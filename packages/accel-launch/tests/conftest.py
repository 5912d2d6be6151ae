import json
import os
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

SCRIPTS = Path(__file__).parent / "scripts"


@pytest.fixture(autouse=True)
def isolated_config_home(tmp_path, monkeypatch):
    """Each test gets its own default-config folder."""
    home = tmp_path / "config-home"
    monkeypatch.setenv("ACCEL_CONFIG_HOME", str(home))
    return home


def accel(*args: str, timeout: float = 120, check: bool = True, env=None):
    """Run the ``accel`` command as a user would (a subprocess)."""
    command = [sys.executable, "-m", "accel_launch.cli", *args]
    return run_command(command, timeout=timeout, check=check, env={**os.environ, **(env or {})})


def reports(stdout: str) -> list[dict]:
    rows = [json.loads(line[7:]) for line in stdout.splitlines() if line.startswith("REPORT ")]
    return sorted(rows, key=lambda r: r["process_index"])

"""Helpers of the ecosystem tests (the ``eco`` fixture): run a script under accel
(``ACCEL_AS_ACCELERATE=1``) or under the reference, in a fresh interpreter, and read the JSON it
prints on a ``RESULT`` line."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import Any

import pytest

SCRIPTS = Path(__file__).parent / "scripts"
LAUNCH = [sys.executable, "-m", "accel_launch.cli", "launch", "--quiet"]
TORCHRUN = [sys.executable, "-m", "torch.distributed.run", "--standalone"]


def require(*packages: str) -> None:
    """Skip the test, with the install command, when a package is missing."""
    for package in packages:
        if importlib.util.find_spec(package) is None:
            hint = (
                "uv sync --group bench" if package == "accelerate" else "uv sync --group ecosystem"
            )
            pytest.skip(f"{package} is not installed ({hint}, Python 3.11+)")


def environment(as_accelerate: bool) -> dict[str, str]:
    """This process's environment with the switch on or off, quiet about the shadowed
    reference, one thread per process."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ACCEL_", "ACCELERATE_"))}
    env["ACCEL_AS_ACCELERATE"] = "1" if as_accelerate else "0"
    env["PYTHONWARNINGS"] = "ignore"
    env.setdefault("OMP_NUM_THREADS", "1")
    env["HF_HUB_OFFLINE"] = env["HF_DATASETS_OFFLINE"] = "1"
    env["TOKENIZERS_PARALLELISM"] = "false"
    return env


def run(argv: list[str], *, as_accelerate: bool, timeout: float = 240) -> dict[str, Any]:
    """Run ``argv``; return the JSON of its ``RESULT`` line (the whole output on failure)."""
    done = subprocess.run(
        argv,
        env=environment(as_accelerate),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    output = done.stdout + done.stderr
    assert done.returncode == 0, output[-6000:]
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert len(lines) == 1, output[-6000:]
    return json.loads(lines[0][len("RESULT ") :])


@pytest.fixture(scope="session")
def eco() -> types.SimpleNamespace:
    """The helpers above, for the tests of this folder."""
    return types.SimpleNamespace(
        SCRIPTS=SCRIPTS,
        LAUNCH=LAUNCH,
        TORCHRUN=TORCHRUN,
        require=require,
        run=run,
        environment=environment,
    )

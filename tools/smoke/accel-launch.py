"""Smoke run of accel-launch installed alone: the ``accel`` command answers ``--help``, and
``accel launch`` starts a tiny script on 2 CPU processes that see each other, and ``accel test``
runs its checks on 2 processes (bounded by timeouts; no config file of the user is read).

Run: ``python tools/smoke/accel-launch.py`` (prints ``ok: accel-launch`` on success).
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path

from accel_state.testing import free_port, run_command

TINY = """
import torch
import torch.distributed as dist
from accel_state import PartialState

state = PartialState()
total = torch.tensor([state.process_index + 1.0])
dist.all_reduce(total)
print(f"RANK {state.process_index} OF {state.num_processes} SUM {total.item():.0f}", flush=True)
"""


def accel_command() -> str:
    beside = Path(sys.executable).parent / "accel"
    found = str(beside) if beside.exists() else shutil.which("accel")
    assert found, "the `accel` command is not installed next to this Python nor on PATH"
    return found


def main() -> None:
    accel = accel_command()
    with tempfile.TemporaryDirectory() as tmp:
        env = {"ACCEL_CONFIG_HOME": tmp}
        helped = run_command([accel, "--help"], timeout=120, env=env)
        for command in ("config", "launch", "env", "estimate-memory", "merge-weights"):
            assert command in helped.stdout, helped.stdout
        script = Path(tmp) / "tiny.py"
        script.write_text(TINY)
        launched = run_command(
            [
                accel,
                "launch",
                "--cpu",
                "--num_processes",
                "2",
                "--main_process_port",
                str(free_port()),
                str(script),
            ],
            timeout=300,
            env=env,
        )
        tested = run_command(
            [
                accel,
                "test",
                "--cpu",
                "--num_processes",
                "2",
                "--main_process_port",
                str(free_port()),
            ],
            timeout=300,
            env=env,
        )
    for rank in (0, 1):
        assert f"RANK {rank} OF 2 SUM 3" in launched.stdout, launched.stdout + launched.stderr
    assert "all checks passed" in tested.stdout, tested.stdout + tested.stderr
    print("ok: accel-launch")


if __name__ == "__main__":
    main()

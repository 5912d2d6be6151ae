"""One process on one machine: the target runs as a plain child of ``accel launch``."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._launcher_base import LaunchCommand, Launcher, LaunchTarget

if TYPE_CHECKING:
    from .._resolve import LaunchPlan

_ENGINES = ("DEEPSPEED", "FSDP", "MEGATRON_LM")
"""Engines that need a process group, hence torchrun, even for one process."""


class PythonLauncher(Launcher):
    """``python script.py``: one process, no process group to form."""

    name = "python"
    announces = False

    def applies(self, plan: LaunchPlan, args: argparse.Namespace) -> bool:
        config = plan.config
        return (
            config.num_processes == 1
            and config.num_machines == 1
            and config.distributed_type not in _ENGINES
        )

    def build(
        self, plan: LaunchPlan, target: LaunchTarget, port: int, env: dict[str, str]
    ) -> LaunchCommand:
        return LaunchCommand(self.name, target.python_command(), env)

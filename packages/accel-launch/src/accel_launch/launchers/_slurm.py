"""srun started every rank (more tasks than machines): this task runs its one rank."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ._launcher_base import LaunchCommand, Launcher, LaunchTarget

if TYPE_CHECKING:
    from .._resolve import LaunchPlan


class SlurmTaskLauncher(Launcher):
    """Runs the target directly, as rank ``SLURM_PROCID`` of the job."""

    name = "slurm-task"
    binds_port = True

    def applies(self, plan: LaunchPlan, args: argparse.Namespace) -> bool:
        return plan.slurm is not None and plan.slurm.one_task_per_rank

    def binds_port_here(self, plan: LaunchPlan) -> bool:
        return plan.slurm is not None and plan.slurm.proc_id == 0

    def build(
        self, plan: LaunchPlan, target: LaunchTarget, port: int, env: dict[str, str]
    ) -> LaunchCommand:
        env.update(MASTER_ADDR=plan.config.main_process_ip or "127.0.0.1", MASTER_PORT=str(port))
        return LaunchCommand(self.name, target.python_command(), env)

"""torchrun (torch's elastic agent, run inside ``accel launch``): the default backend."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accel_state import environment_variables as contract

from ._launcher_base import LaunchCommand, Launcher, LaunchTarget
from ._processes import run_torchrun

if TYPE_CHECKING:
    from .._resolve import LaunchPlan


class TorchrunLauncher(Launcher):
    """Starts this machine's processes and restarts the group on a failure; names the rank
    that failed first."""

    name = "torchrun"
    binds_port = True
    config_fields = ("rdzv_backend", "max_restarts", "monitor_interval", "machine_rank")

    def applies(self, plan: LaunchPlan, args: argparse.Namespace) -> bool:
        return True

    def build(
        self, plan: LaunchPlan, target: LaunchTarget, port: int, env: dict[str, str]
    ) -> LaunchCommand:
        config = plan.config
        argv = [
            f"--nproc_per_node={config.num_processes // config.num_machines}",
            f"--nnodes={config.num_machines}",
            f"--max_restarts={config.max_restarts}",
            f"--monitor_interval={config.monitor_interval}",
        ]
        host = config.main_process_ip or "127.0.0.1"
        if config.rdzv_backend == "c10d":
            argv += [
                "--rdzv_backend=c10d",
                f"--rdzv_endpoint={host}:{port}",
                f"--rdzv_id={contract.read_env(contract.ACCEL_RDZV_ID, 'accel')}",
                f"--rdzv_conf=is_host={1 if config.machine_rank == 0 else 0}",
            ]
        else:
            argv += [
                f"--node_rank={config.machine_rank}",
                f"--master_addr={host}",
                f"--master_port={port}",
            ]
        if target.module:
            argv.append("--module")
        if target.no_python:
            argv.append("--no_python")
        return LaunchCommand(self.name, argv + target.argv, env)

    def run(self, command: LaunchCommand, env: dict[str, str], quiet: bool) -> int:
        return run_torchrun(command.argv, env, quiet)

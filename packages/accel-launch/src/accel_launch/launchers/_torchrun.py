"""torchrun (torch's elastic agent, run inside ``accel launch``): the default backend."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accel_state import environment_variables as contract

from .._errors import ConfigError
from ._config_field import ConfigField
from ._launcher_base import LaunchCommand, Launcher, LaunchTarget
from ._processes import run_torchrun

if TYPE_CHECKING:
    from .._resolve import LaunchPlan
    from ..configs._config_file import LaunchConfig


def _check_max_restarts(value: int | None, config: LaunchConfig) -> None:
    if value is not None and value < 0:
        raise ConfigError(f"max_restarts must be >= 0; got {value}. Use e.g. 1.")


def _check_monitor_interval(value: float, config: LaunchConfig) -> None:
    if not value > 0:
        raise ConfigError(
            f"monitor_interval is the seconds between two health checks and must be > 0; "
            f"got {value}. Use e.g. 0.1."
        )


def _check_rdzv_backend(value: str, config: LaunchConfig) -> None:
    if value not in ("static", "c10d"):
        raise ConfigError(
            f"rdzv_backend must be 'static' or 'c10d'; got {value!r}. Use "
            "static (fixed machine ranks) or c10d (elastic)."
        )


class TorchrunLauncher(Launcher):
    """Starts this machine's processes and restarts the group on a failure; names the rank
    that failed first."""

    name = "torchrun"
    binds_port = True
    config_fields = (
        ConfigField(
            "max_restarts",
            int,
            0,
            "How many times a failed worker group is restarted before the job fails.",
            check=_check_max_restarts,
        ),
        ConfigField(
            "monitor_interval",
            float,
            0.1,
            "Seconds between two checks of the workers' health.",
            check=_check_monitor_interval,
        ),
        ConfigField(
            "rdzv_backend",
            str,
            "static",
            "Rendezvous backend: ``static`` or ``c10d``.",
            check=_check_rdzv_backend,
        ),
    )

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

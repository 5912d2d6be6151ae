"""``mpirun`` over the hosts of a hostfile (Open MPI, or a Hydra-based MPI)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from accel_state import environment_variables as contract

from ._cluster import mpi_flavour, mpirun_command
from ._launcher_base import LaunchCommand, Launcher, LaunchTarget

if TYPE_CHECKING:
    from .._resolve import LaunchPlan


class MpirunLauncher(Launcher):
    """``mpirun`` starts every rank; the ranks read their index from MPI's variables."""

    name = "mpirun"
    runs_target_here = False
    executable = ("mpirun", "Install an MPI, e.g. `apt-get install openmpi-bin`.")
    binds_port = True
    starts_ranks = True
    config_fields = ("mpirun_hostfile",)

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--mpirun_hostfile",
            default=None,
            help="Start the processes with mpirun on the hosts of this hostfile.",
        )

    def applies(self, plan: LaunchPlan, args: argparse.Namespace) -> bool:
        return bool(plan.config.mpirun_hostfile)

    def build(
        self, plan: LaunchPlan, target: LaunchTarget, port: int, env: dict[str, str]
    ) -> LaunchCommand:
        config = plan.config
        assert config.mpirun_hostfile is not None
        env.update(MASTER_ADDR=config.main_process_ip or "127.0.0.1", MASTER_PORT=str(port))
        flavour = contract.read_env(contract.ACCEL_MPI_FLAVOUR) or mpi_flavour()
        argv = mpirun_command(
            config.mpirun_hostfile,
            config.num_processes,
            config.num_machines,
            env,
            target.python_command(),
            flavour=flavour,
        )
        return LaunchCommand(self.name, argv, env)

"""``mpirun`` over the hosts of a hostfile (Open MPI, or a Hydra-based MPI)."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from accel_state import DistributedType
from accel_state import environment_variables as contract

from .._errors import ConfigError
from ._cluster import mpi_flavour, mpirun_command
from ._config_field import ConfigField
from ._launcher_base import LaunchCommand, Launcher, LaunchTarget

if TYPE_CHECKING:
    from .._resolve import LaunchPlan
    from ..configs._config_file import LaunchConfig


def _check_hostfile(value: str | None, config: LaunchConfig) -> None:
    if value and config.distributed_type == DistributedType.DEEPSPEED.value:
        raise ConfigError(
            f"mpirun_hostfile starts plain processes with mpirun; got it with "
            f"distributed_type=DEEPSPEED. Use --deepspeed_hostfile with "
            f"--deepspeed_multinode_launcher openmpi instead (got {value!r})."
        )


def _existing_file(path: str) -> str | None:
    return None if os.path.isfile(path) else f"{path!r} is not an existing file"


class MpirunLauncher(Launcher):
    """``mpirun`` starts every rank; the ranks read their index from MPI's variables."""

    name = "mpirun"
    runs_target_here = False
    executable = ("mpirun", "Install an MPI, e.g. `apt-get install openmpi-bin`.")
    binds_port = True
    starts_ranks = True
    config_fields = (
        ConfigField(
            "mpirun_hostfile",
            str | None,
            None,
            "Start the processes with ``mpirun`` on the hosts of this hostfile (multi-CPU).",
            check=_check_hostfile,
            prompt="Path of the MPI hostfile (`host slots=N` lines)?",
            confirm="Start the processes with mpirun?",
            asked_for=("multi-CPU",),
            answer_check=_existing_file,
            replaces="mpirun_config.mpirun_hostfile",
        ),
    )

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

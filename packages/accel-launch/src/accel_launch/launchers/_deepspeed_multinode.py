"""DeepSpeed's multi-machine launcher (pdsh, openmpi, mvapich, slurm), run on machine 0."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from .._errors import ConfigError
from ._cluster import deepspeed_command, find_executable
from ._launcher_base import LaunchCommand, Launcher, LaunchTarget

if TYPE_CHECKING:
    from .._resolve import LaunchPlan


class DeepSpeedLauncher(Launcher):
    """``deepspeed --hostfile ...`` starts every machine from machine 0; with the ``standard``
    launcher each machine runs torchrun instead."""

    name = "deepspeed"
    runs_target_here = False
    executable = ("deepspeed", "Install it: pip install deepspeed")
    starts_ranks = True
    # Its settings (deepspeed_hostfile, deepspeed_multinode_launcher, deepspeed_inclusion_filter,
    # deepspeed_exclusion_filter) belong to the deepspeed_config section, which the single
    # machine DeepSpeed runs read as well: they stay declared in DeepSpeedConfig.

    def applies(self, plan: LaunchPlan, args: argparse.Namespace) -> bool:
        config = plan.config
        launcher = config.deepspeed_config.deepspeed_multinode_launcher or "pdsh"
        return (
            config.distributed_type == "DEEPSPEED"
            and config.num_machines > 1
            and plan.slurm is None
            and launcher != "standard"
        )

    def build(
        self, plan: LaunchPlan, target: LaunchTarget, port: int, env: dict[str, str]
    ) -> LaunchCommand:
        config = plan.config
        ds = config.deepspeed_config
        if config.machine_rank != 0:
            raise ConfigError(
                "DeepSpeed's multi-machine launcher starts every machine from machine 0; got "
                f"machine_rank={config.machine_rank}. Run `accel launch` on machine 0 only, or "
                "pass --deepspeed_multinode_launcher standard to start each machine yourself."
            )
        if not ds.deepspeed_hostfile:
            raise ConfigError(
                f"DeepSpeed over num_machines={config.num_machines} needs a hostfile listing "
                "them; got none. Pass --deepspeed_hostfile hosts.txt (lines `host slots=N`)."
            )
        argv = deepspeed_command(
            hostfile=ds.deepspeed_hostfile,
            num_machines=config.num_machines,
            processes_per_machine=config.num_processes // config.num_machines,
            main_process_ip=config.main_process_ip,
            main_process_port=port,
            launcher=ds.deepspeed_multinode_launcher or "pdsh",
            inclusion_filter=ds.deepspeed_inclusion_filter,
            exclusion_filter=ds.deepspeed_exclusion_filter,
            env=env,
            target=target.argv,
            module=target.module,
            no_python=target.no_python,
        )
        return LaunchCommand(self.name, argv, env)

    def prepare(self, command: LaunchCommand, target: LaunchTarget) -> None:
        assert self.executable is not None
        command.argv[0] = find_executable(*self.executable)

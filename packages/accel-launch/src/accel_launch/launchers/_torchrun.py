"""torchrun (torch's elastic agent, run inside ``accel launch``): the default backend."""

from __future__ import annotations

import argparse
import re
from typing import TYPE_CHECKING

from accel_state import environment_variables as contract

from .._errors import ConfigError
from ._config_field import ConfigField
from ._launcher_base import LaunchCommand, Launcher, LaunchTarget, finite, integer
from ._processes import run_torchrun

if TYPE_CHECKING:
    from .._resolve import LaunchPlan
    from ..configs._config_file import LaunchConfig


PASS_THROUGH: dict[str, str] = {
    "tee": "Copy each process's stdout/stderr to a log file as well as the console "
    "(torchrun --tee: 0 none, 1 stdout, 2 stderr, 3 both; or per rank, e.g. 0:3,1:1). Needs "
    "--log_dir.",
    "log_dir": "Folder where torchrun writes each process's log files (torchrun --log_dir).",
    "role": "Role of the workers of this run (torchrun --role).",
    "rdzv_conf": "More rendezvous settings, key=value pairs separated by commas "
    "(torchrun --rdzv_conf, e.g. timeout=900).",
}
"""torchrun's options that ``accel launch`` gives it as they are, with their help text."""

_TEE = re.compile(r"[0-3]|[0-9]+:[0-3](,[0-9]+:[0-3])*")
"""What torchrun's ``--tee`` accepts: one stream code, or ``rank:code`` pairs."""


def add_pass_through_flags(group: argparse._ArgumentGroup) -> None:
    """Add the flags of `PASS_THROUGH` to ``accel launch`` (group ``torchrun``)."""
    for name, help_text in PASS_THROUGH.items():
        names = ["-t", f"--{name}"] if name == "tee" else [f"--{name}"]
        group.add_argument(*names, default=None, help=help_text)


def add_pass_through(launcher: str, argv: list[str], args: argparse.Namespace) -> None:
    """Insert the pass-through options given on the command line into torchrun's ``argv``
    (in place). A given ``--rdzv_conf`` is joined to the one the backend writes itself.

    Raises:
        ConfigError: such an option is given but the run starts its processes with another
            backend (``launcher``), or ``--tee`` is given without ``--log_dir`` (torchrun has
            nowhere to write the copy).
    """
    options = {
        name: str(getattr(args, name))
        for name in PASS_THROUGH
        if getattr(args, name, None) is not None
    }
    if not options:
        return
    if launcher != TorchrunLauncher.name:
        given = ", ".join(f"--{name}" for name in options)
        raise ConfigError(
            f"{given} are options of torchrun, but this run starts its processes with "
            f"{launcher}; got {given}. Drop them, or run through torchrun (several processes "
            "without --mpirun_hostfile or DeepSpeed's multi-machine launcher)."
        )
    if "tee" in options:
        tee = options["tee"]
        if not _TEE.fullmatch(tee):
            shown = tee if tee.isprintable() else repr(tee)  # one line, control characters quoted
            raise ConfigError(
                "--tee takes 0 (none), 1 (stdout), 2 (stderr) or 3 (both), or one of them per "
                f"rank as rank:stream pairs; got --tee {shown}. Write e.g. --tee 3 or "
                "--tee 0:3,1:1."
            )
        if tee != "0" and "log_dir" not in options:
            raise ConfigError(
                "--tee copies the output of the processes to log files, so it needs a folder; "
                f"got --tee {tee} without --log_dir. Add --log_dir logs/."
            )
    extra: list[str] = []
    for name, value in options.items():
        if name == "rdzv_conf":
            mine = next((i for i, a in enumerate(argv) if a.startswith("--rdzv_conf=")), None)
            if mine is not None:
                argv[mine] = f"{argv[mine]},{value}"
                continue
        extra.append(f"--{name}={value}")
    argv[0:0] = extra


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

    def add_flags(self, group: argparse._ArgumentGroup) -> None:
        group.add_argument(
            "--rdzv_backend", default=None, choices=["static", "c10d"], help="Rendezvous backend."
        )
        group.add_argument(
            "--max_restarts",
            type=integer,
            default=None,
            help="Restart a failed worker group N times.",
        )
        group.add_argument(
            "--monitor_interval",
            type=finite,
            default=None,
            help="Seconds between two health checks of the workers.",
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

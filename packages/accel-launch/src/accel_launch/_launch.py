"""``accel launch``: start a script on one or many processes, on one or many machines."""

from __future__ import annotations

import argparse
import os
import sys

from accel_state import environment_variables as contract

from ._compat_flags import check_refused
from ._errors import ConfigError
from ._flags import add_launch_arguments, normalize_argv
from ._resolve import (
    LaunchPlan,
    check_port_free,
    child_environment,
    cpu_openmp_environment,
    free_port,
    resolve,
)
from .commands._sagemaker import launch_on_sagemaker, sagemaker_config_path
from .commands._tpu import launch_tpu
from .launchers._launcher_base import LaunchCommand as Command
from .launchers._launcher_base import Launcher
from .launchers._launcher_base import LaunchTarget as Target
from .launchers._launcher_registry import choose
from .launchers._torchrun import add_pass_through

__all__ = ["Command", "add_launch_arguments", "build_command", "launch", "normalize_argv"]


def _target(args: argparse.Namespace) -> tuple[list[str], bool, bool]:
    """Return (command after the interpreter, run as module, no python)."""
    if not args.training_script:
        raise ConfigError(
            "accel launch needs a script to run; got none. Use `accel launch script.py [args]` "
            "or `accel launch -m package.module [args]`."
        )
    return (
        [args.training_script, *args.training_script_args],
        bool(args.module),
        bool(args.no_python),
    )


def _port(plan: LaunchPlan) -> int:
    config = plan.config
    port = config.main_process_port or 0
    if port == 0:
        port = free_port() if config.num_machines == 1 else 29500
    return port


def build_command(
    plan: LaunchPlan,
    target: list[str],
    module: bool,
    no_python: bool,
    port: int,
    args: argparse.Namespace | None = None,
) -> Command:
    """Choose the launcher for ``plan`` and build its command line.

    The registered backends are asked in order (``launchers/_launcher_registry.py``): srun started every
    rank (run the target directly) > ``mpirun_hostfile`` (mpirun) > DeepSpeed over several
    machines with a launcher other than ``standard`` (DeepSpeed's launcher, from machine 0) >
    one process (plain python) > torchrun.
    """
    env = child_environment(plan.config)
    env.update(cpu_openmp_environment(plan))
    backend = choose(plan, args)
    return backend.build(plan, Target(list(target), module, no_python), port, env)


def _hang_timeout(command: Command, args: argparse.Namespace) -> None:
    """Pass ``--hang_timeout`` to the processes as ``ACCEL_HANG_TIMEOUT``."""
    value = getattr(args, "hang_timeout", None)
    if value is None:
        return
    most = contract.ACCEL_HANG_TIMEOUT.maximum or float("inf")
    if not 0 <= value <= most:
        raise ConfigError(
            "--hang_timeout is the seconds a process may wait in one collective and must be "
            f">= 0 and at most {most:g}; got {value:g}. Use e.g. --hang_timeout 60, or 0 to "
            "turn the watchdog off."
        )
    command.env[contract.ACCEL_HANG_TIMEOUT] = f"{value:g}"


def _as_accelerate(command: Command, args: argparse.Namespace) -> None:
    """Pass ``--as_accelerate`` to the processes as ``ACCEL_AS_ACCELERATE=1``."""
    if getattr(args, "as_accelerate", None):
        command.env[contract.ACCEL_AS_ACCELERATE] = contract.env_text(True)


def _command(
    plan: LaunchPlan, args: argparse.Namespace, port: int
) -> tuple[Launcher, Target, Command]:
    """The backend that applies, the target, and the command with the flags' additions."""
    target = Target(*_target(args))
    backend = choose(plan, args)
    env = child_environment(plan.config)
    env.update(cpu_openmp_environment(plan))
    command = backend.build(plan, target, port, env)
    add_pass_through(command.launcher, command.argv, args)
    _hang_timeout(command, args)
    _as_accelerate(command, args)
    return backend, target, command


def launch(args: argparse.Namespace) -> int:
    """Run ``accel launch`` with parsed arguments; return the exit code."""
    sagemaker = sagemaker_config_path(args)
    if sagemaker is not None:  # the job runs on SageMaker instances, not here
        return launch_on_sagemaker(sagemaker, args)
    check_refused(args)
    plan = resolve(args)
    if plan.config.distributed_type == "XLA":  # torch_xla's spawn here, or gcloud on a pod
        plan.print_warnings()
        return launch_tpu(plan, args)
    if args.explain:
        command = _command(plan, args, _port(plan))[2] if args.training_script else None
        plan.print_warnings()
        print(plan.explain())
        if command is not None:
            print(f"\nlauncher: {command.launcher}\ncommand: {command.display()}")
            print("environment of the processes:")
            for name, value in sorted(command.env.items()):
                print(f"  {name}={value}")
        return 0
    config = plan.config
    port = _port(plan)
    backend, target, command = _command(plan, args, port)
    backend.prepare(command, target)
    if config.main_process_port and backend.binds_port_here(plan):
        check_port_free(config.main_process_ip or "127.0.0.1", port)
    plan.print_warnings()  # nothing refuses the launch after this point
    quiet = bool(args.quiet)
    if not quiet and backend.announces:
        processes, machines = backend.layout(plan)
        print(
            f"accel launch: {_count(processes, 'process', 'processes')} on "
            f"{_count(machines, 'machine', 'machines')} via {command.launcher}, "
            f"{config.distributed_type}, mixed precision {config.mixed_precision}",
            file=sys.stderr,
        )
    return backend.run(command, {**os.environ, **command.env}, quiet)


def _count(number: int, one: str, many: str) -> str:
    """``1 process``, ``2 processes``."""
    return f"{number} {one if number == 1 else many}"

"""``accel launch``: start a script on one or many processes, on one or many machines."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from dataclasses import dataclass, field

from accel_state import environment_variables as contract

from ._cluster import (
    deepspeed_command,
    find_executable,
    mpi_flavour,
    mpirun_command,
    python_target,
)
from ._compat_flags import add_torchrun_options, check_refused
from ._config_file import LaunchConfig
from ._errors import ConfigError
from ._flags import add_launch_arguments, normalize_argv
from ._processes import check_target, run_child, run_torchrun
from ._resolve import (
    LaunchPlan,
    check_port_free,
    child_environment,
    cpu_openmp_environment,
    free_port,
    resolve,
)
from ._sagemaker import launch_on_sagemaker, sagemaker_config_path
from ._tpu import launch_tpu

__all__ = ["Command", "add_launch_arguments", "build_command", "launch", "normalize_argv"]


@dataclass
class Command:
    """What ``accel launch`` runs on this machine."""

    launcher: str
    """``python`` (one process), ``torchrun``, ``mpirun``, ``deepspeed`` or ``slurm-task``
    (srun started every rank; this task runs one)."""
    argv: list[str]
    """The command line (for ``torchrun``: its arguments, run in this process)."""
    env: dict[str, str] = field(default_factory=dict)
    """Variables added to the environment of the processes."""

    def display(self) -> str:
        """The command as a shell line."""
        head = ["torchrun"] if self.launcher == "torchrun" else []
        return shlex.join(head + self.argv)


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


def _torchrun_argv(
    config: LaunchConfig, port: int, target: list[str], module: bool, no_python: bool
) -> list[str]:
    nproc = config.num_processes // config.num_machines
    argv = [
        f"--nproc_per_node={nproc}",
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
    if module:
        argv.append("--module")
    if no_python:
        argv.append("--no_python")
    return argv + target


def _port(plan: LaunchPlan) -> int:
    config = plan.config
    port = config.main_process_port or 0
    if port == 0:
        port = free_port() if config.num_machines == 1 else 29500
    return port


def build_command(
    plan: LaunchPlan, target: list[str], module: bool, no_python: bool, port: int
) -> Command:
    """Choose the launcher for ``plan`` and build its command line.

    Order: srun started every rank (run the target directly) > ``mpirun_hostfile`` (mpirun) >
    DeepSpeed over several machines with a launcher other than ``standard`` (DeepSpeed's
    launcher, from machine 0) > one process (plain python) > torchrun.
    """
    config = plan.config
    env = child_environment(config)
    env.update(cpu_openmp_environment(plan))
    host = config.main_process_ip or "127.0.0.1"
    if plan.slurm is not None and plan.slurm.one_task_per_rank:
        env.update(MASTER_ADDR=host, MASTER_PORT=str(port))
        return Command("slurm-task", python_target(target, module, no_python), env)
    if config.mpirun_hostfile:
        env.update(MASTER_ADDR=host, MASTER_PORT=str(port))
        flavour = contract.read_env(contract.ACCEL_MPI_FLAVOUR) or mpi_flavour()
        argv = mpirun_command(
            config.mpirun_hostfile,
            config.num_processes,
            config.num_machines,
            env,
            python_target(target, module, no_python),
            flavour=flavour,
        )
        return Command("mpirun", argv, env)
    ds = config.deepspeed_config
    if (
        config.distributed_type == "DEEPSPEED"
        and config.num_machines > 1
        and plan.slurm is None
        and (ds.deepspeed_multinode_launcher or "pdsh") != "standard"
    ):
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
            target=target,
            module=module,
            no_python=no_python,
        )
        return Command("deepspeed", argv, env)
    engine = config.distributed_type in ("DEEPSPEED", "FSDP", "MEGATRON_LM")
    if config.num_processes == 1 and config.num_machines == 1 and not engine:
        return Command("python", python_target(target, module, no_python), env)
    return Command("torchrun", _torchrun_argv(config, port, target, module, no_python), env)


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


def launch(args: argparse.Namespace) -> int:
    """Run ``accel launch`` with parsed arguments; return the exit code."""
    sagemaker = sagemaker_config_path(args)
    if sagemaker is not None:  # the job runs on SageMaker instances, not here
        return launch_on_sagemaker(sagemaker, args)
    check_refused(args)
    plan = resolve(args)
    if plan.config.distributed_type == "XLA":  # torch_xla's spawn here, or gcloud on a pod
        return launch_tpu(plan, args)
    if args.explain:
        print(plan.explain())
        if args.training_script:
            target, module, no_python = _target(args)
            command = build_command(plan, target, module, no_python, _port(plan))
            add_torchrun_options(command.launcher, command.argv, args)
            _hang_timeout(command, args)
            _as_accelerate(command, args)
            print(f"\nlauncher: {command.launcher}\ncommand: {command.display()}")
            print("environment of the processes:")
            for name, value in sorted(command.env.items()):
                print(f"  {name}={value}")
        return 0
    target, module, no_python = _target(args)
    config = plan.config
    port = _port(plan)
    command = build_command(plan, target, module, no_python, port)
    add_torchrun_options(command.launcher, command.argv, args)
    _hang_timeout(command, args)
    _as_accelerate(command, args)
    if command.launcher in ("python", "torchrun", "slurm-task"):  # runs on this machine
        check_target(target[0], module, no_python)
    if command.launcher == "mpirun":
        find_executable("mpirun", "Install an MPI, e.g. `apt-get install openmpi-bin`.")
    if command.launcher == "deepspeed":
        command.argv[0] = find_executable("deepspeed", "Install it: pip install deepspeed")
    if (
        config.main_process_port
        and command.launcher in ("torchrun", "mpirun", "slurm-task")
        and _binds_port_here(plan)
    ):
        check_port_free(config.main_process_ip or "127.0.0.1", port)
    env = {**os.environ, **command.env}
    quiet = bool(args.quiet)
    if not quiet and command.launcher != "python":
        print(
            f"accel launch: {_count(config.num_processes, 'process', 'processes')} on "
            f"{_count(config.num_machines, 'machine', 'machines')} via {command.launcher}, "
            f"{config.distributed_type}, mixed precision {config.mixed_precision}",
            file=sys.stderr,
        )
    if command.launcher == "torchrun":
        return run_torchrun(command.argv, env, quiet)
    launcher = command.launcher in ("mpirun", "deepspeed")
    code = run_child(command.argv, env, forward_sigint=launcher)
    if code != 0 and command.launcher in ("mpirun", "deepspeed") and not quiet:
        print(
            f"accel launch: {command.launcher} exited with code {code}; the ranks' output "
            "above says which failed.",
            file=sys.stderr,
        )
    return code


def _count(number: int, one: str, many: str) -> str:
    """``1 process``, ``2 processes``."""
    return f"{number} {one if number == 1 else many}"


def _binds_port_here(plan: LaunchPlan) -> bool:
    """Whether the rendezvous port is opened by a process of this machine."""
    if plan.slurm is not None and plan.slurm.one_task_per_rank:
        return plan.slurm.proc_id == 0
    return plan.config.machine_rank == 0

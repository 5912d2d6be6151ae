"""``accel launch``: start a script on one or many processes, on one or many machines."""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from typing import Any

from ._config import ConfigError, LaunchConfig
from ._resolve import LaunchPlan, check_port_free, child_environment, free_port, resolve


def _bool_flag(parser: argparse._ActionsContainer, name: str, help_text: str) -> None:
    parser.add_argument(f"--{name}", action="store_true", default=None, help=help_text)


def add_launch_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add every ``accel launch`` flag to ``parser``. Unset flags stay None so the config file
    applies."""
    parser.add_argument(
        "--config_file",
        default=None,
        help="Config file to read (default: the file written by `accel config`, when it exists).",
    )
    parser.add_argument(
        "--explain",
        action="store_true",
        help="Print each resolved setting and where it came from, then exit.",
    )
    _bool_flag(parser, "quiet", "Do not print the launcher's own messages.")
    hw = parser.add_argument_group("Hardware")
    _bool_flag(hw, "cpu", "Run on CPU even when accelerators are present.")
    hw.add_argument("--gpu_ids", default=None, help="GPUs to use: 'all' or e.g. '0,1'.")
    hw.add_argument(
        "--num_cpu_threads_per_process",
        type=int,
        default=None,
        help="OMP_NUM_THREADS of each process.",
    )
    dist_group = parser.add_argument_group("Distributed")
    dist_group.add_argument(
        "--num_processes",
        type=int,
        default=None,
        help="Total number of processes over all machines.",
    )
    dist_group.add_argument("--num_machines", type=int, default=None, help="Number of machines.")
    dist_group.add_argument(
        "--machine_rank", type=int, default=None, help="Index of this machine (0 = main)."
    )
    dist_group.add_argument("--main_process_ip", default=None, help="Address of machine 0.")
    dist_group.add_argument(
        "--main_process_port",
        type=int,
        default=None,
        help="Rendezvous port (0 or absent: a free port on one machine).",
    )
    dist_group.add_argument(
        "--rdzv_backend", default=None, choices=["static", "c10d"], help="Rendezvous backend."
    )
    _bool_flag(dist_group, "same_network", "All machines share one network.")
    dist_group.add_argument(
        "--max_restarts",
        type=int,
        default=None,
        help="Restart a failed worker group up to N times.",
    )
    dist_group.add_argument(
        "--monitor_interval",
        type=float,
        default=None,
        help="Seconds between two health checks of the workers.",
    )
    _bool_flag(dist_group, "multi_gpu", "Accepted for compatibility; derived from the count.")
    prec = parser.add_argument_group("Precision and compilation")
    prec.add_argument("--mixed_precision", default=None, help="no, fp16, bf16 or fp8.")
    prec.add_argument("--dynamo_backend", default=None, help="torch.compile backend or 'no'.")
    prec.add_argument("--dynamo_mode", default=None, help="torch.compile mode.")
    _bool_flag(prec, "dynamo_use_fullgraph", "Refuse graph breaks.")
    _bool_flag(prec, "dynamo_use_dynamic", "Compile with dynamic shapes.")
    _bool_flag(parser, "debug", "Check collectives across ranks (clear errors, not hangs).")
    script = parser.add_argument_group("What to run")
    _bool_flag(script, "module", "Run the target as a module (python -m); `-m` is the same.")
    _bool_flag(script, "no_python", "Run the target as an executable, not a Python script.")
    parser.add_argument(
        "training_script",
        nargs="?",
        default=None,
        help="The script (or module, or executable) to run.",
    )
    parser.add_argument(
        "training_script_args", nargs=argparse.REMAINDER, help="Arguments of the script."
    )
    return parser


def normalize_argv(argv: list[str]) -> list[str]:
    """Turn ``-m module args`` into ``--module module args`` so the module's own flags (even
    ``--help``) go to the module, as with ``python -m``."""
    out = list(argv)
    for i, token in enumerate(out):
        if token == "-m":
            out[i] = "--module"
            break
        if not token.startswith("-") and (i == 0 or not out[i - 1].startswith("--")):
            break
    return out


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
    plan: LaunchPlan, port: int, target: list[str], module: bool, no_python: bool
) -> list[str]:
    c = plan.config
    nproc = c.num_processes // c.num_machines
    argv = [
        f"--nproc_per_node={nproc}",
        f"--nnodes={c.num_machines}",
        f"--max_restarts={c.max_restarts}",
        f"--monitor_interval={c.monitor_interval}",
    ]
    host = c.main_process_ip or "127.0.0.1"
    if c.rdzv_backend == "c10d":
        argv += [
            "--rdzv_backend=c10d",
            f"--rdzv_endpoint={host}:{port}",
            f"--rdzv_id={os.environ.get('ACCEL_RDZV_ID', 'accel')}",
        ]
        if c.machine_rank == 0:
            argv += ["--rdzv_conf=is_host=1"]
        else:
            argv += ["--rdzv_conf=is_host=0"]
    else:
        argv += [f"--node_rank={c.machine_rank}", f"--master_addr={host}", f"--master_port={port}"]
    if module:
        argv.append("--module")
    if no_python:
        argv.append("--no_python")
    return argv + target


def launch(args: argparse.Namespace) -> int:
    """Run ``accel launch`` with parsed arguments; return the exit code."""
    plan = resolve(args)
    if args.explain:
        print(plan.explain())
        return 0
    target, module, no_python = _target(args)
    config: LaunchConfig = plan.config
    env = {**os.environ, **child_environment(config)}
    quiet = bool(args.quiet)
    if config.num_processes == 1 and config.num_machines == 1:
        if no_python:
            command = target
        else:
            command = [sys.executable, *(["-m"] if module else []), *target]
        return subprocess.call(command, env=env)
    port = config.main_process_port or 0
    if port == 0:
        port = free_port() if config.num_machines == 1 else 29500
    elif config.machine_rank == 0:
        check_port_free(config.main_process_ip or "127.0.0.1", port)
    argv = _torchrun_argv(plan, port, target, module, no_python)
    if not quiet:
        print(
            f"accel launch: {config.num_processes} processes on {config.num_machines} "
            f"machine(s), {config.distributed_type}, mixed precision {config.mixed_precision}",
            file=sys.stderr,
        )
    return _run_torchrun(argv, env, quiet)


def _run_torchrun(argv: list[str], env: dict[str, Any], quiet: bool) -> int:
    """Run torch.distributed.run in this process with ``env`` as the environment."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    os.environ.clear()
    os.environ.update(env)
    torch_args = get_args_parser().parse_args(argv)
    if quiet:
        import logging

        logging.getLogger("torch.distributed.elastic").setLevel(logging.ERROR)
    try:
        run(torch_args)
    except ChildFailedError as err:
        first = err.get_first_failure()
        rank, failure = first
        print(
            f"accel launch: process of global rank {rank} failed with exit code "
            f"{failure.exitcode} ({failure.message or 'see its traceback above'}); "
            "every other process was stopped.",
            file=sys.stderr,
        )
        return failure.exitcode if failure.exitcode and failure.exitcode > 0 else 1
    return 0

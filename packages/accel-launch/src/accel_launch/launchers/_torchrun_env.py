"""``prepare_multi_gpu_env``: the reference's helper that turns parsed launch arguments into
torchrun's rendezvous arguments and the environment of the processes, built from accel's
launch plan."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

from .._resolve import (
    _ENGINE_FLAGS,
    _NOT_SETTINGS,
    _SECTION_ENGINE,
    _apply_flags,
    _derive,
    check_port_free,
    child_environment,
    free_port,
)
from ..configs._config_file import LaunchConfig
from ..configs._engine_configs import section_flags

DEFAULT_PORT = 29500
"""The rendezvous port when none is given (torchrun's own default)."""


def _set_rendezvous(args: argparse.Namespace) -> int:
    """Fill torchrun's arguments (``nproc_per_node``, ``master_port`` ...) on ``args``; return
    the port."""
    port = args.main_process_port
    port = free_port() if port == 0 else DEFAULT_PORT if port is None else int(port)
    args.main_process_port = port
    machines = int(getattr(args, "num_machines", None) or 1)
    processes = int(args.num_processes)
    if machines > 1:
        args.nproc_per_node = str(processes // machines)
        args.nnodes = str(machines)
        args.node_rank = int(args.machine_rank)
        if getattr(args, "same_network", False):
            args.master_addr = str(args.main_process_ip)
            args.master_port = str(port)
        else:
            args.rdzv_endpoint = f"{args.main_process_ip}:{port}"
    else:
        args.nproc_per_node = str(processes)
        args.master_port = str(port)
    if machines <= 1 or int(getattr(args, "machine_rank", 0) or 0) == 0:
        check_port_free("", port)  # only the main machine binds it
    return port


def _settings(args: argparse.Namespace) -> dict[str, Any]:
    """The set arguments that are launch settings; options of an engine this run does not use
    are left out (the reference's namespace carries every engine's defaults)."""
    given = {k: v for k, v in vars(args).items() if v is not None and k not in _NOT_SETTINGS}
    chosen = {engine for flag, engine in _ENGINE_FLAGS.items() if given.get(flag)}
    by_flag = section_flags()
    for flag in list(given):
        engine = _SECTION_ENGINE.get(by_flag.get(flag, ("", ""))[0])
        if engine is not None and engine not in chosen:
            del given[flag]
    return given


def prepare_multi_gpu_env(args: argparse.Namespace) -> dict[str, str]:
    """The environment of processes started by torchrun on one or more machines.

    Like the reference's helper, it also sets torchrun's arguments on ``args``:
    ``nproc_per_node`` and, on one machine, ``master_port``; on several, ``nnodes``,
    ``node_rank`` and ``rdzv_endpoint`` (``master_addr`` / ``master_port`` with
    ``same_network``). ``main_process_port`` 0 picks a free port, None means 29500. The
    returned environment is this process's, plus the ``ACCEL_*`` variables of
    ``accel_state.environment_variables`` that carry the settings (accel's processes also read
    the reference's ``ACCELERATE_*`` names).

    Args:
        args: Parsed launch arguments (the reference's ``accelerate launch`` namespace, or
            ``accel launch``'s).

    Returns:
        The environment for the processes.

    Raises:
        ConfigError: the rendezvous port is taken on the main machine (accel does not move to
            another port behind the user's back), or a setting is invalid.
        ValueError: ``module`` and ``no_python`` are both set.
    """
    _set_rendezvous(args)
    if getattr(args, "module", False) and getattr(args, "no_python", False):
        raise ValueError(
            "--module runs the script as a Python module and --no_python runs it as a program "
            "without Python; got both. Keep one of them."
        )
    config = LaunchConfig()
    sources = {name: "default" for name in config.to_dict()}
    _apply_flags(config, sources, _settings(args))
    if config.distributed_type == "NO":
        config.distributed_type = "MULTI_GPU"
    config.validate()
    warnings: list[str] = []
    _derive(config, sources, False, warnings)  # MULTI_GPU becomes MULTI_CPU without GPUs
    config.validate()
    for line in warnings:
        print(line, file=sys.stderr)
    env = os.environ.copy()
    env.update(child_environment(config))
    return env

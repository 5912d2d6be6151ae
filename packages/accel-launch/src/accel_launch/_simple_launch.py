"""The reference's launch helpers ``_validate_launch_command`` and
``prepare_simple_launcher_cmd_env``, built on accel's launch plan.

The first merges the config file into the parsed arguments (flags win), the second gives the
command line and environment of a launch without torchrun (one process, or ``mpirun``).
"""

from __future__ import annotations

import argparse
import os

from ._resolve import _FLAG_TO_FIELD, child_environment, cpu_openmp_environment, resolve
from .configs._config_file import LaunchConfig
from .configs._engine_configs import SECTIONS

DEFAULT_PORT = 29500
"""The rendezvous port when none is given (torchrun's default)."""

_FIELD_TO_FLAG = {field: flag for flag, field in _FLAG_TO_FIELD.items()}


def _from_outside(source: str) -> bool:
    """Whether a setting's value came from the config file or SLURM (not a flag, default or
    the hardware)."""
    return source.startswith(("config file", "SLURM"))


def validate_launch_command(
    args: argparse.Namespace,
) -> tuple[argparse.Namespace, LaunchConfig | None, bool]:
    """Fill ``args`` with the config file's settings where no flag was given, and check them.

    Precedence is ``accel launch``'s: defaults < config file (``--config_file``, else the
    default file) < SLURM < flags. Each setting the config file (or SLURM) decided is written on
    ``args`` under its field name (``use_cpu``) and its flag name (``cpu``) when they differ;
    section settings under their flag names (``fsdp_sync_module_states``).

    Args:
        args: Parsed ``accel launch`` arguments (from
            [`launch_command_parser`][accel_launch.launch_command_parser]).

    Returns:
        ``args`` (changed in place), the merged config when a config file was read (else
        ``None``), and whether ``mixed_precision`` came from the config file.

    Raises:
        ConfigError: A setting is invalid, with the rule, the value and the fix.
    """
    plan = resolve(args)
    plan.print_warnings()
    for name, value in plan.config.to_dict().items():
        if name in SECTIONS:
            for key, sub in value.items():
                if _from_outside(plan.sources.get(f"{name}.{key}", "default")):
                    setattr(args, key, sub)
            continue
        if _from_outside(plan.sources.get(name, "default")):
            setattr(args, name, value)
            if name in _FIELD_TO_FLAG:
                setattr(args, _FIELD_TO_FLAG[name], value)
    from_config = _from_outside(plan.sources.get("mixed_precision", "default"))
    return args, (plan.config if plan.config_path is not None else None), from_config


def prepare_simple_launcher_cmd_env(
    args: argparse.Namespace,
) -> tuple[list[str], dict[str, str]]:
    """The command line and environment of a launch without torchrun.

    The command is ``python [-m] script args`` (just ``script args`` with ``--no_python``),
    behind ``mpirun`` when the plan names an ``mpirun_hostfile``. The environment is this
    process's plus the ``ACCEL_*`` variables of the plan, ``MASTER_ADDR`` / ``MASTER_PORT`` when
    there are several processes or machines, and the Intel OpenMP settings
    (``KMP_AFFINITY``, ``KMP_BLOCKTIME``) when the launch was told to use the CPU.

    Args:
        args: Parsed ``accel launch`` arguments, usually after
            [`validate_launch_command`][accel_launch.validate_launch_command].

    Returns:
        ``(command, environment)``.

    Raises:
        ValueError: ``module`` and ``no_python`` are both set, or no script is given.
        ConfigError: A setting is invalid, with the rule, the value and the fix.
    """
    from ._launch import _target, build_command

    if getattr(args, "module", False) and getattr(args, "no_python", False):
        raise ValueError(
            "--module runs the script as a Python module and --no_python runs it as a program "
            "without Python; got both. Keep one of them."
        )
    plan = resolve(args)
    config = plan.config
    target, module, no_python = _target(args)
    port = int(config.main_process_port or DEFAULT_PORT)
    command = build_command(plan, target, module, no_python, port, args)
    plan.print_warnings()
    if command.launcher not in ("python", "mpirun", "slurm-task"):
        from .launchers._cluster import python_target

        command.argv = python_target(target, module, no_python)
    env = os.environ.copy()
    env.update(child_environment(config))
    if config.num_processes > 1 or config.num_machines > 1:
        env["MASTER_ADDR"] = config.main_process_ip or "127.0.0.1"
        env["MASTER_PORT"] = str(port)
    env.update(cpu_openmp_environment(plan, os.environ))
    env.update({k: v for k, v in command.env.items() if k not in env})
    return command.argv, env


__all__ = ["prepare_simple_launcher_cmd_env", "validate_launch_command"]

"""The reference CLI's Python entry points for ``env``, ``test``, ``estimate-memory``,
``to-fsdp2`` and ``tpu-config`` (``env_command_parser``, ``env_command`` ...), each driving
accel's own command: the parsers take the flags of the ``accel`` subcommand, the commands
return or raise what the reference's do.
"""

from __future__ import annotations

import argparse
import logging
import shutil
import subprocess
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("accel_launch")


def _parser(subparsers: Any, name: str, description: str, command: Any) -> argparse.ArgumentParser:
    """The parser of ``accel <name>``: added to ``subparsers`` (running ``command``) when given,
    else a standalone parser."""
    if subparsers is not None:
        parser: argparse.ArgumentParser = subparsers.add_parser(name, help=description)
        parser.set_defaults(func=command)
        return parser
    return argparse.ArgumentParser(prog=f"accel {name}", description=description)


# -------------------------------------------------------------------------------------- env
def env_command_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of ``accel env`` (``--config_file``); added to ``subparsers`` when given."""
    parser = _parser(subparsers, "env", "Print versions and the resolved config.", env_command)
    parser.add_argument(
        "--config_file", default=None, help="The config file to show (default: the default one)."
    )
    return parser


def env_command(
    args: argparse.Namespace, which: Callable[[str], str | None] = shutil.which
) -> dict[str, Any]:
    """Print the report of ``accel env`` as ``- key: value`` lines and return it.

    Args:
        args: From [`env_command_parser`][accel_launch.env_command_parser].
        which: Finds a command on ``PATH`` (``shutil.which``).

    Returns:
        The report, keyed as the reference's (see
        [`env_info`][accel_launch.env_info]).
    """
    from ._env_cmd import env_info

    info = env_info(args.config_file, which=which)
    configs = info["`Accelerate` configs"]
    print("\n".join(f"- {k}: {v}" for k, v in info.items() if k != "`Accelerate` configs"))
    print("- config file:" if args.config_file is None else "- config file passed:")
    if isinstance(configs, dict):
        print("\n".join(f"\t- {k}: {v}" for k, v in configs.items()))
    else:
        print(f"\t{configs}")
    return info


# ------------------------------------------------------------------------------------- test
def test_command_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of ``accel test`` as the reference's: ``--config_file`` only."""
    parser = _parser(subparsers, "test", "Check the configured processes.", test_command)
    parser.add_argument(
        "--config_file", default=None, help="Config file to test (default: the default one)."
    )
    return parser


def test_command(args: argparse.Namespace) -> None:
    """Run ``accel test`` on the processes of ``args.config_file`` (or the default config).

    Raises:
        subprocess.CalledProcessError: A check failed, with the exit code.
    """
    from ._commands import _test

    settings = dict.fromkeys(
        ("num_processes", "num_machines", "machine_rank", "main_process_ip", "main_process_port")
    )
    code = _test(argparse.Namespace(config_file=args.config_file, cpu=None, **settings))
    if code != 0:
        raise subprocess.CalledProcessError(code, ["accel", "test"])


# ---------------------------------------------------------------------------------- estimate
def estimate_command_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of ``accel estimate-memory``."""
    from ._estimate_cmd import add_estimate_arguments

    parser = _parser(
        subparsers, "estimate-memory", "Memory a model needs per dtype.", estimate_command
    )
    add_estimate_arguments(parser)
    return parser


def estimate_command(args: argparse.Namespace) -> None:
    """Print the estimate of ``args.model``, as ``accel estimate-memory`` does.

    Raises:
        ConfigError: The model cannot be estimated offline, with the fix.
    """
    from ._estimate_cmd import estimate_memory_command

    estimate_memory_command(args)


def gather_data(args: argparse.Namespace) -> list[list[Any]]:
    """The estimate of ``args.model`` as the reference's rows: ``[dtype, largest layer bytes,
    total bytes, {"training": bytes to train with Adam}]`` per dtype."""
    from ._estimate_cmd import estimate_rows

    return [
        [row.dtype, row.largest_layer, row.total_size, {"training": row.training_size}]
        for row in estimate_rows(args)
    ]


# ---------------------------------------------------------------------------------- to-fsdp2
def to_fsdp2_command_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of ``accel to-fsdp2``."""
    from ._to_fsdp2 import add_to_fsdp2_arguments

    parser = _parser(
        subparsers, "to-fsdp2", "Convert a config file's FSDP1 keys to FSDP2.", to_fsdp2_command
    )
    add_to_fsdp2_arguments(parser)
    return parser


def convert_config_to_fsdp2(config: dict[str, Any]) -> dict[str, Any]:
    """A copy of a config mapping with FSDP2 keys in ``fsdp_config``; each FSDP1 key dropped
    is logged as a warning. A config already at ``fsdp_version: 2`` comes back unchanged."""
    from ._to_fsdp2 import convert_to_fsdp2

    converted, changes = convert_to_fsdp2(config)
    for change in changes:
        if change.startswith("removed "):
            logger.warning("to-fsdp2: %s", change)
    return converted


def to_fsdp2_command(args: argparse.Namespace) -> None:
    """Convert ``args.config_file`` to FSDP2 and write it, as ``accel to-fsdp2`` does.

    Raises:
        FileNotFoundError: ``--config_file`` does not exist.
        ValueError: Neither ``--output_file`` nor ``--overwrite`` is given.
        FileExistsError: The output file exists and ``--overwrite`` is not set.
    """
    from ._to_fsdp2 import fsdp2_paths, write_fsdp2

    source, target = fsdp2_paths(args)
    write_fsdp2(source, target)


# -------------------------------------------------------------------------------- tpu-config
def tpu_command_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of ``accel tpu-config``."""
    from ._tpu import add_tpu_config_arguments

    parser = _parser(
        subparsers,
        "tpu-config",
        "Run setup commands on every TPU pod worker.",
        tpu_command_launcher,
    )
    add_tpu_config_arguments(parser)
    return parser


def tpu_command_launcher(args: argparse.Namespace) -> None:
    """Run the pod setup command of ``args`` through gcloud; with ``--debug`` print
    ``Running <command>`` (its words joined by spaces, as the reference prints it) instead.

    Raises:
        ConfigError: No TPU name, zone or command, or no ``gcloud`` on ``PATH``.
        subprocess.CalledProcessError: gcloud failed, with its exit code.
    """
    from ._tpu import run_gcloud, tpu_config_plan

    command = tpu_config_plan(args)
    if args.debug:
        print(f"Running {' '.join(command)}")
        return
    code = run_gcloud(command)
    if code != 0:
        raise subprocess.CalledProcessError(code, command)


__all__ = [
    "convert_config_to_fsdp2",
    "env_command",
    "env_command_parser",
    "estimate_command",
    "estimate_command_parser",
    "gather_data",
    "test_command",
    "test_command_parser",
    "to_fsdp2_command",
    "to_fsdp2_command_parser",
    "tpu_command_launcher",
    "tpu_command_parser",
]

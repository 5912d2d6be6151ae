"""The reference CLI's Python entry points (``launch_command_parser``, ``launch_command``), which
libraries call to start a script as ``accelerate launch`` would (TRL's command line does).

Both drive ``accel launch``: the parser knows every ``accel launch`` flag, and the command runs
the launch those flags describe.
"""

from __future__ import annotations

import argparse
import subprocess
from collections.abc import Sequence
from typing import Any

from .._flags import FlagParser, add_launch_arguments, normalize_argv


class _LaunchParser(FlagParser):
    """``accel launch``'s parser that also reads a true/false flag given without a value
    (``--fsdp_offload_params``), as the command line does."""

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: Any = None
    ) -> tuple[argparse.Namespace, list[str]]:
        if args is not None:
            args = normalize_argv(list(args), self)
        return super().parse_known_args(args, namespace)


def launch_command_parser(subparsers: Any = None) -> argparse.ArgumentParser:
    """The parser of ``accel launch``'s flags, as the reference's ``launch_command_parser``.

    Args:
        subparsers: The ``add_subparsers()`` object of a parent parser to add ``launch`` to, or
            ``None`` for a standalone parser.

    Returns:
        The parser; its ``parse_args(["--num_processes", "2", "train.py", ...])`` gives the
        namespace that [`launch_command`][accel_launch.launch_command] runs.
    """
    if subparsers is not None:
        parser = subparsers.add_parser(
            "launch", help="Run a script on one or many processes.", parser_class=_LaunchParser
        )
    else:
        parser = _LaunchParser(
            prog="accel launch", description="Run a script on one or many processes."
        )
    add_launch_arguments(parser)
    parser.set_defaults(func=launch_command)
    return parser


def launch_command(args: argparse.Namespace) -> None:
    """Run the launch described by ``args`` (from
    [`launch_command_parser`][accel_launch.launch_command_parser]), as ``accel launch`` does.

    Raises:
        subprocess.CalledProcessError: The launched processes failed (the reference raises the
            same), with their exit code.
    """
    from .._launch import launch

    code = launch(args)
    if code != 0:
        raise subprocess.CalledProcessError(
            code, ["accel", "launch", str(args.training_script), *args.training_script_args]
        )

"""``accel.commands.launch``: the reference's ``launch_command_parser`` and ``launch_command``,
which start a script as ``accel launch`` does (TRL's command line calls them),
``_validate_launch_command``, which fills parsed arguments from the config file, and ``main``."""

from __future__ import annotations

import sys

from accel_launch import launch_command, launch_command_parser
from accel_launch import validate_launch_command as _validate_launch_command
from accel_launch.cli import reference_main

__all__ = ["_validate_launch_command", "launch_command", "launch_command_parser", "main"]


def main() -> int:
    """The reference's ``accelerate-launch`` console script (and ``python -m
    accelerate.commands.launch``): ``accel launch`` with the words of ``sys.argv``; returns its
    exit code."""
    return reference_main("accelerate-launch")


if __name__ == "__main__":
    sys.exit(main())

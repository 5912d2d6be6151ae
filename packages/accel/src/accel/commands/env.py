"""``accel.commands.env``: the reference's ``env_command_parser`` and ``env_command``, which
print and return the report of ``accel env``.

The ``accel`` command is looked up on ``PATH`` with this module's ``which`` at each call.
"""

from __future__ import annotations

import argparse
import sys
from shutil import which
from typing import Any

from accel_launch import env_command as _env_command
from accel_launch import env_command_parser
from accel_launch.cli import main as _accel_main

__all__ = ["env_command", "env_command_parser", "main", "which"]


def env_command(args: argparse.Namespace) -> dict[str, Any]:
    """Print the report of ``accel env`` and return it under the reference's keys (see
    ``accel_launch.env_info``).

    Args:
        args: From [`env_command_parser`][accel.commands.env.env_command_parser].
    """
    return _env_command(args, which=which)


def main() -> int:
    """``python -m accelerate.commands.env``: ``accel env`` with the words of ``sys.argv``;
    returns its exit code."""
    return _accel_main(["env", *sys.argv[1:]], prog="accelerate")


if __name__ == "__main__":
    sys.exit(main())

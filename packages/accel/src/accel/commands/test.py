"""``accel.commands.test``: the reference's ``test_command_parser`` and ``test_command``, which
run ``accel test`` on the configured processes."""

from __future__ import annotations

import sys

from accel_launch import test_command, test_command_parser
from accel_launch.cli import main as _accel_main

__all__ = ["main", "test_command", "test_command_parser"]


def main() -> int:
    """``python -m accelerate.commands.test``: ``accel test`` with the words of ``sys.argv``;
    returns its exit code."""
    return _accel_main(["test", *sys.argv[1:]], prog="accelerate")


if __name__ == "__main__":
    sys.exit(main())

"""``accel.commands.test``: the reference's ``test_command_parser`` and ``test_command``, which
run ``accel test`` on the configured processes."""

from __future__ import annotations

from accel_launch import test_command, test_command_parser

__all__ = ["test_command", "test_command_parser"]

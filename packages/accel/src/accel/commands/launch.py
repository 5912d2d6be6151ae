"""``accel.commands.launch``: the reference's ``launch_command_parser`` and ``launch_command``,
which start a script as ``accel launch`` does (TRL's command line calls them)."""

from __future__ import annotations

from accel_launch import launch_command, launch_command_parser

__all__ = ["launch_command", "launch_command_parser"]

"""``accel.commands.launch``: the reference's ``launch_command_parser`` and ``launch_command``,
which start a script as ``accel launch`` does (TRL's command line calls them), and
``_validate_launch_command``, which fills parsed arguments from the config file."""

from __future__ import annotations

from accel_launch import launch_command, launch_command_parser
from accel_launch import validate_launch_command as _validate_launch_command

__all__ = ["_validate_launch_command", "launch_command", "launch_command_parser"]

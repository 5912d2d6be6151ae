"""``accel.commands.to_fsdp2``: the reference's ``to_fsdp2_command_parser``,
``to_fsdp2_command`` and ``convert_config_to_fsdp2``, which run ``accel to-fsdp2``."""

from __future__ import annotations

from accel_launch import convert_config_to_fsdp2, to_fsdp2_command, to_fsdp2_command_parser

__all__ = ["convert_config_to_fsdp2", "to_fsdp2_command", "to_fsdp2_command_parser"]

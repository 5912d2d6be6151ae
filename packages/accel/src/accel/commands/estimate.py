"""``accel.commands.estimate``: the reference's ``estimate_command_parser``,
``estimate_command`` and ``gather_data``, which run ``accel estimate-memory`` (offline: a local
``config.json`` or a ``package.module:Class``), and ``add_timm_hub_prefix``."""

from __future__ import annotations

from accel_launch import (
    add_timm_hub_prefix,
    estimate_command,
    estimate_command_parser,
    gather_data,
)

__all__ = ["add_timm_hub_prefix", "estimate_command", "estimate_command_parser", "gather_data"]

"""``accel.commands.estimate``: the reference's ``estimate_command_parser``,
``estimate_command`` and ``gather_data``, which run ``accel estimate-memory`` (offline: a local
``config.json`` or a ``package.module:Class``), and ``add_timm_hub_prefix``."""

from __future__ import annotations

import sys

from accel_launch import (
    add_timm_hub_prefix,
    estimate_command,
    estimate_command_parser,
    gather_data,
)
from accel_launch.cli import reference_main

__all__ = [
    "add_timm_hub_prefix",
    "estimate_command",
    "estimate_command_parser",
    "gather_data",
    "main",
]


def main() -> int:
    """The reference's ``accelerate-estimate-memory`` console script: ``accel
    estimate-memory`` with the words of ``sys.argv``; returns its exit code."""
    return reference_main("accelerate-estimate-memory")


if __name__ == "__main__":
    sys.exit(main())

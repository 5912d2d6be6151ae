"""``accel.commands.config.config``: the reference's module of the ``config`` command, which
``python -m accelerate.commands.config.config`` runs: ``accel config`` (its questions, or
``default`` / ``update`` / ``import``)."""

from __future__ import annotations

import sys

from accel_launch.cli import reference_main

__all__ = ["main"]


def main() -> int:
    """Run ``accel config`` with the words of ``sys.argv``; return its exit code."""
    return reference_main("accelerate-config")


if __name__ == "__main__":
    sys.exit(main())

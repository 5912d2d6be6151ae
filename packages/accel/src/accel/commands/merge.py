"""``accel.commands.merge``: the reference's ``accelerate-merge-weights`` console script
(``accelerate.commands.merge:main``), which runs ``accel merge-weights``."""

from __future__ import annotations

import sys

from accel_launch.cli import reference_main

__all__ = ["main"]


def main() -> int:
    """Run ``accel merge-weights`` with the words of ``sys.argv``; return its exit code."""
    return reference_main("accelerate-merge-weights")


if __name__ == "__main__":
    sys.exit(main())

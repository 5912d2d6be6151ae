"""``accel.commands.accelerate_cli``: the reference's ``accelerate`` console script
(``accelerate.commands.accelerate_cli:main``) on accel's command line.

Under ``accel.install_as_accelerate()`` (``ACCEL_AS_ACCELERATE=1``), the reference's installed
``accelerate`` command runs this ``main``: ``accelerate launch ...`` is ``accel launch ...``.
"""

from __future__ import annotations

import sys

from accel_launch.cli import reference_main

__all__ = ["main"]


def main() -> int:
    """Run ``accelerate <command> ...`` (the words of ``sys.argv``) as ``accel <command> ...``;
    return its exit code."""
    return reference_main("accelerate")


if __name__ == "__main__":
    sys.exit(main())

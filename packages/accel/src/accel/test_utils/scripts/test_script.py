"""The ``accel test`` script at the reference library's module path.

The script belongs to the command that runs it: it lives in ``accel_launch.test_script``, so
``pip install accel-launch`` alone has a working ``accel test``. This path runs the same checks.
"""

from __future__ import annotations

from accel_launch.test_script import CHECKS, check, main

__all__ = ["CHECKS", "check", "main"]

if __name__ == "__main__":
    raise SystemExit(main())

"""Runs in each process started by a launcher that does not forward our environment.

``python -m accel_launch._child <packed env> [--module | --no_python] target [args...]`` sets
the variables packed by `accel_launch.launchers._cluster.encode_environment`, then runs the target
as ``python target``, ``python -m target`` or the executable ``target``.
"""

from __future__ import annotations

import base64
import json
import os
import runpy
import sys


def main(argv: list[str]) -> None:
    """Set the packed variables, then run the target in this process."""
    if not argv:
        raise SystemExit(
            "accel_launch._child needs <packed env> [--module|--no_python] target [args]; got "
            "nothing. It is started by `accel launch`, not by hand."
        )
    packed, rest = argv[0], argv[1:]
    os.environ.update(json.loads(base64.urlsafe_b64decode(packed.encode()).decode()))
    mode = "script"
    if rest and rest[0] in ("--module", "--no_python"):
        mode, rest = rest[0][2:], rest[1:]
    if not rest:
        raise SystemExit("accel_launch._child: no target to run after the packed environment.")
    if mode == "no_python":
        os.execvp(rest[0], rest)
    sys.argv = list(rest)
    if mode == "module":
        runpy.run_module(rest[0], run_name="__main__", alter_sys=True)
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(rest[0])))
        runpy.run_path(rest[0], run_name="__main__")


if __name__ == "__main__":
    main(sys.argv[1:])

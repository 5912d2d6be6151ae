"""Run by ``accel_as_accelerate.pth`` at interpreter start, only when ``ACCEL_AS_ACCELERATE`` is
set: reads the variable through the environment contract and turns the switch on.

The ``.pth`` line costs one environment lookup when the variable is unset; this module is
imported only when it is set.
"""

from __future__ import annotations

import sys

from accel_state.environment_variables import ACCEL_AS_ACCELERATE, read_env

_told = False
"""Whether the refusal of a bad value was already printed (the ``.pth`` line can run twice)."""


def install_from_environment() -> None:
    """Call ``accel.install_as_accelerate()`` when ``ACCEL_AS_ACCELERATE`` is true.

    A value outside the vocabulary leaves the switch off and prints one line with the rule
    (once per process), instead of the traceback ``site`` would print at every start.
    """
    global _told
    try:
        on = read_env(ACCEL_AS_ACCELERATE, False)
    except ValueError as err:
        if not _told:
            print(f"accel: {err} The switch stays off.", file=sys.stderr)
            _told = True
        return
    if on:
        from ._as_accelerate import install_as_accelerate

        install_as_accelerate()

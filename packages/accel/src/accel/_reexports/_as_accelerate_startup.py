"""Run by ``accel_as_accelerate.pth`` at interpreter start, only when ``ACCEL_AS_ACCELERATE`` is
set: reads the variable through the environment contract and turns the switch on.

The ``.pth`` line costs one environment lookup when the variable is unset; this module is
imported only when it is set.
"""

from __future__ import annotations

from accel_state.environment_variables import ACCEL_AS_ACCELERATE, read_env


def install_from_environment() -> None:
    """Call ``accel.install_as_accelerate()`` when ``ACCEL_AS_ACCELERATE`` is true."""
    if read_env(ACCEL_AS_ACCELERATE, False):
        from ._as_accelerate import install_as_accelerate

        install_as_accelerate()

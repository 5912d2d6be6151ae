"""``accel.local_sgd``: ``LocalSGD``, training alone on each process and averaging the weights
every few steps."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.local_sgd"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_state import (
        DistributedType,
    )

    from accel._facade._accelerator import (
        Accelerator,
    )
    from accel._facade._local_sgd import (
        LocalSGD,
    )

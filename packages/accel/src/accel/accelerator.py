"""``accel.accelerator``: the names of the reference's ``accelerate.accelerator`` (the
``Accelerator`` and what that module imports that code takes from it), from the accel packages
that own them."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.accelerator"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

"""``accel.test_utils.testing``: the reference's ``accelerate.test_utils.testing``: skip decorators, launch commands,
``unittest`` bases and assertions, from the accel modules that provide them."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.test_utils.testing"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

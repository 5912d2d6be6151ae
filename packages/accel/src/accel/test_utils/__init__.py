"""``accel.test_utils``: the test helpers of the reference's ``accelerate.test_utils`` (skip
decorators, launch commands, the regression model and dataset), for test suites of code that
runs on accel."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.test_utils"]

__all__ = sorted(_EXPORTS)

# The reference's ``accelerate.test_utils.<name>`` paths, importable as attributes too.
_SUBMODULES = ("examples", "scripts", "testing", "training")

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS, submodules=_SUBMODULES)

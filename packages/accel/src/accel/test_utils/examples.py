"""``accel.test_utils.examples``: the reference's ``accelerate.test_utils.examples``: the check that a
complete example script holds what each by-feature example adds."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.test_utils.examples"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

"""``accel.test_utils.training``: the reference's ``accelerate.test_utils.training``: the regression model and dataset,
and the offline mocked dataloaders."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.test_utils.training"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

"""``accel.big_modeling``: the names of the reference's ``accelerate.big_modeling``, from the accel packages
that own them."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS
from ._reexports._replaceable import make_replaceable

_EXPORTS = PATHS["accel.big_modeling"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

make_replaceable(__name__)  # `big_modeling.check_device_map = f` changes what dispatch_model runs

"""``accel.utils.ao``: the names of the reference's ``accelerate.utils.ao``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.ao"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_precision import (
        convert_model_to_fp8_ao,
        filter_first_and_last_linear_layers,
        filter_linear_layers,
        find_first_last_linear_layers,
        has_ao_layers,
    )
    from accel_state import (
        is_torchao_available,
        torchao_required,
    )

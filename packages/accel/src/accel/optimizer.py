"""``accel.optimizer``: the names of the reference's ``accelerate.optimizer``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.optimizer"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_collectives import (
        honor_type,
    )
    from accel_state import (
        AcceleratorState,
        DistributedType,
        GradientState,
        is_lomo_available,
        is_torch_xla_available,
    )

    from accel._facade._optimizer_wrappers import (
        AcceleratedOptimizer,
        move_to_device,
        patch_optimizer_step,
    )

"""``accel.utils.deepspeed``: the names of the reference's ``accelerate.utils.deepspeed``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.deepspeed"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_state import (
        DistributedType,
        HfDeepSpeedConfig,
        compare_versions,
        is_bnb_available,
    )

    from accel._engines._deepspeed_helpers import (
        get_active_deepspeed_plugin,
        map_pytorch_optim_to_deepspeed,
    )
    from accel._engines._deepspeed_objects import (
        DeepSpeedEngineWrapper,
        DeepSpeedOptimizerWrapper,
        DeepSpeedSchedulerWrapper,
        DummyOptim,
        DummyScheduler,
    )
    from accel._facade._optimizer_wrappers import (
        AcceleratedOptimizer,
        AcceleratedScheduler,
    )

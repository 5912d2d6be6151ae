"""``accel.utils.megatron_lm``: the names of the reference's ``accelerate.utils.megatron_lm``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.megatron_lm"]

__all__ = sorted(_EXPORTS)


__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_collectives import (
        recursively_apply,
        send_to_device,
    )
    from accel_state import (
        is_megatron_lm_available,
    )

    from accel._engines._megatron_objects import (
        MegatronLMDummyScheduler,
        MegatronLMSchedulerWrapper,
        avg_losses_across_data_parallel_group,
        gather_across_data_parallel_groups,
    )
    from accel._engines._megatron_steps import (
        AbstractTrainStep,
        BertTrainStep,
        GPTTrainStep,
        T5TrainStep,
    )
    from accel._facade._optimizer_wrappers import (
        AcceleratedOptimizer,
        AcceleratedScheduler,
    )

"""``accel.checkpointing``: the names of the reference's ``accelerate.checkpointing``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.checkpointing"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import SAFE_MODEL_NAME
    from accel_state import (
        PartialState,
        get_logger,
        get_pretty_name,
        is_cuda_available,
        is_hpu_available,
        is_mlu_available,
        is_musa_available,
        is_neuron_available,
        is_sdaa_available,
        is_torch_version,
        is_torch_xla_available,
        is_xpu_available,
    )

    from accel._checkpoint._functional import (
        SAMPLER_NAME,
        load_accelerator_state,
        load_custom_state,
        save_accelerator_state,
        save_custom_state,
    )
    from accel._checkpoint._model_weights import (
        save,
    )
    from accel._checkpoint._state_files import (
        MODEL_NAME,
        OPTIMIZER_NAME,
        RNG_STATE_NAME,
        SAFE_WEIGHTS_NAME,
        SCALER_NAME,
        SCHEDULER_NAME,
        WEIGHTS_NAME,
    )
    from accel._checkpoint._torch_load import load

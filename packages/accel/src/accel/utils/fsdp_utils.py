"""``accel.utils.fsdp_utils``: the names of the reference's ``accelerate.utils.fsdp_utils``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.fsdp_utils"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        get_non_persistent_buffers,
    )
    from accel_launch import merge_fsdp_weights
    from accel_state import (
        FSDP_MODEL_NAME,
        get_logger,
        get_module_class_from_name,
        is_torch_version,
    )

    from accel._checkpoint._fsdp_functions import (
        get_parameters_from_modules,
        load_fsdp_model,
        load_fsdp_optimizer,
        save_fsdp_model,
        save_fsdp_optimizer,
    )
    from accel._checkpoint._model_weights import (
        save,
    )
    from accel._checkpoint._state_files import (
        OPTIMIZER_NAME,
        SAFE_WEIGHTS_NAME,
        WEIGHTS_NAME,
    )
    from accel._facade._model_probes import is_peft_model
    from accel._facade._unwrap import (
        is_compiled_module,
    )

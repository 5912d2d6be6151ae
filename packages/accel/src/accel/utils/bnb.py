"""``accel.utils.bnb``: the names of the reference's ``accelerate.utils.bnb``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from .._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.utils.bnb"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_bigmodel import (
        dispatch_model,
        find_tied_parameters,
        get_balanced_memory,
        get_parameter_device,
        infer_auto_device_map,
        init_empty_weights,
        load_checkpoint_in_model,
        offload_weight,
        set_module_tensor_to_device,
    )
    from accel_precision import (
        BnbQuantizationConfig,
        get_keys_to_not_convert,
        get_quantized_model_device_map,
        has_4bit_bnb_layers,
        load_and_quantize_model,
        quantize_and_offload_8bit,
        replace_with_bnb_layers,
    )
    from accel_state import (
        is_4bit_bnb_available,
        is_8bit_bnb_available,
    )

"""Mixed precision for accel: autocast, gradient scaling, FP8 recipes and bitsandbytes."""

from __future__ import annotations

from accel_state.lazy import lazy_module as _lazy_module

# Public name -> the private module that defines it, loaded on first use: the one list of
# this package's names (__all__ and the type stub beside this file are made from it).
_EXPORTS = {
    "autocast_context": "._amp",
    "autocast_dtype": "._amp",
    "make_grad_scaler": "._amp",
    "BnbQuantizationConfig": "._bnb_config",
    "PendingQuantization": "._bnb_layers",
    "get_keys_to_not_convert": "._bnb_layers",
    "has_4bit_bnb_layers": "._bnb_layers",
    "quantized_memory_footprint": "._bnb_layers",
    "replace_with_bnb_layers": "._bnb_layers",
    "get_quantized_model_device_map": "._bnb_load",
    "load_and_quantize_model": "._bnb_load",
    "quantize_and_offload_8bit": "._bnb_load",
    "QuantStateMismatchError": "._bnb_state_check",
    "ConvertOutputsToFp32": "._fp32_outputs",
    "convert_outputs_to_fp32": "._fp32_outputs",
    "get_grad_scaler": "._fp32_outputs",
    "get_mixed_precision_context_manager": "._fp32_outputs",
    "convert_model_to_fp8": "._fp8",
    "fp8_forward_context": "._fp8",
    "prepare_msamp": "._fp8",
    "prepare_msamp_objects": "._fp8",
    "switch_optimizer_parameters": "._fp8",
    "convert_model_to_fp8_ao": "._fp8_ao",
    "filter_first_and_last_linear_layers": "._fp8_ao",
    "filter_linear_layers": "._fp8_ao",
    "find_first_last_linear_layers": "._fp8_ao",
    "has_ao_layers": "._fp8_ao",
    "AORecipeKwargs": "._fp8_recipes",
    "FP8BackendType": "._fp8_recipes",
    "FP8RecipeKwargs": "._fp8_recipes",
    "MSAMPRecipeKwargs": "._fp8_recipes",
    "TERecipeKwargs": "._fp8_recipes",
    "default_fp8_backend": "._fp8_recipes",
    "recipe_backend": "._fp8_recipes",
    "resolve_fp8_recipe": "._fp8_recipes",
    "convert_model_to_te": "._fp8_te",
    "has_transformer_engine_layers": "._fp8_te",
    "make_te_recipe": "._fp8_te",
    "te_recipe_kwargs": "._fp8_te",
}

# Read from the installed metadata on first access.
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

__getattr__, __dir__ = _lazy_module(globals(), _EXPORTS, distribution="accel-precision")

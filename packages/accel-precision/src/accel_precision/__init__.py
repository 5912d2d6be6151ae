"""Mixed precision for accel: autocast, gradient scaling, FP8 recipes and bitsandbytes."""

from importlib.metadata import version as _version

from ._amp import autocast_context, autocast_dtype, make_grad_scaler
from ._bnb_config import BnbQuantizationConfig
from ._bnb_layers import (
    PendingQuantization,
    get_keys_to_not_convert,
    has_4bit_bnb_layers,
    quantized_memory_footprint,
    replace_with_bnb_layers,
)
from ._bnb_load import (
    get_quantized_model_device_map,
    load_and_quantize_model,
    quantize_and_offload_8bit,
)
from ._fp8 import (
    convert_model_to_fp8,
    fp8_forward_context,
    prepare_msamp,
    prepare_msamp_objects,
    switch_optimizer_parameters,
)
from ._fp8_ao import (
    convert_model_to_fp8_ao,
    filter_first_and_last_linear_layers,
    filter_linear_layers,
    find_first_last_linear_layers,
    has_ao_layers,
)
from ._fp8_recipes import (
    AORecipeKwargs,
    FP8BackendType,
    FP8RecipeKwargs,
    MSAMPRecipeKwargs,
    TERecipeKwargs,
    default_fp8_backend,
    recipe_backend,
    resolve_fp8_recipe,
)
from ._fp8_te import (
    convert_model_to_te,
    has_transformer_engine_layers,
    make_te_recipe,
    te_recipe_kwargs,
)
from ._fp32_outputs import (
    ConvertOutputsToFp32,
    convert_outputs_to_fp32,
    get_grad_scaler,
    get_mixed_precision_context_manager,
)

__version__ = _version("accel-precision")

__all__ = [
    "AORecipeKwargs",
    "BnbQuantizationConfig",
    "FP8BackendType",
    "FP8RecipeKwargs",
    "MSAMPRecipeKwargs",
    "PendingQuantization",
    "TERecipeKwargs",
    "__version__",
    "autocast_context",
    "autocast_dtype",
    "convert_model_to_fp8",
    "convert_model_to_fp8_ao",
    "convert_model_to_te",
    "convert_outputs_to_fp32",
    "default_fp8_backend",
    "filter_first_and_last_linear_layers",
    "filter_linear_layers",
    "find_first_last_linear_layers",
    "fp8_forward_context",
    "get_keys_to_not_convert",
    "get_quantized_model_device_map",
    "has_4bit_bnb_layers",
    "has_ao_layers",
    "has_transformer_engine_layers",
    "load_and_quantize_model",
    "quantize_and_offload_8bit",
    "make_grad_scaler",
    "make_te_recipe",
    "prepare_msamp",
    "prepare_msamp_objects",
    "quantized_memory_footprint",
    "recipe_backend",
    "replace_with_bnb_layers",
    "resolve_fp8_recipe",
    "switch_optimizer_parameters",
    "te_recipe_kwargs",
    "ConvertOutputsToFp32",
    "get_grad_scaler",
    "get_mixed_precision_context_manager",
]

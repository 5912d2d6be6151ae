"""Mixed precision for accel: autocast, gradient scaling, FP8 recipes and bitsandbytes."""

from importlib.metadata import version as _version

from ._amp import autocast_context, autocast_dtype, convert_outputs_to_fp32, make_grad_scaler

__version__ = _version("accel-precision")

__all__ = [
    "__version__",
    "autocast_context",
    "autocast_dtype",
    "convert_outputs_to_fp32",
    "make_grad_scaler",
]

"""Mixed precision for accel: autocast, grad scaling, FP8 recipes and bitsandbytes quantization."""

from importlib.metadata import version as _version

__version__ = _version("accel-precision")

__all__ = ["__version__"]

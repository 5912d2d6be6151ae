"""Run any PyTorch script on one CPU, many processes, many machines, DeepSpeed or FSDP, in mixed precision."""

from importlib.metadata import version as _version

__version__ = _version("accel")

__all__ = ["__version__"]

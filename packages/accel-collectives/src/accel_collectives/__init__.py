"""Collective operations on nested tensors (gather, reduce, broadcast, pad_across_processes, ...) for accel."""

from importlib.metadata import version as _version

__version__ = _version("accel-collectives")

__all__ = ["__version__"]

"""Sharded, dispatched and resumable DataLoaders for accel."""

from importlib.metadata import version as _version

__version__ = _version("accel-data")

__all__ = ["__version__"]

"""Process state for accel: who am I, how many are we, which device, and the process group behind it."""

from importlib.metadata import version as _version

__version__ = _version("accel-state")

__all__ = ["__version__"]

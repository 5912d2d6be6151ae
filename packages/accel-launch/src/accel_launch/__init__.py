"""The accel and accel-launch commands: config, launch, test, env."""

from importlib.metadata import version as _version

__version__ = _version("accel-launch")

__all__ = ["__version__"]

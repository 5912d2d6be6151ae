"""Pipeline-parallel inference (prepare_pippy) on torch.distributed.pipelining."""

from importlib.metadata import version as _version

__version__ = _version("accel-pipeline")

__all__ = ["__version__"]

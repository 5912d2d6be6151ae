"""Pipeline-parallel inference (``prepare_pippy``) on ``torch.distributed.pipelining``."""

from importlib.metadata import version as _version

from ._prepare import prepare_pippy
from ._split_points import find_split_points
from ._trace import BACKEND, PipelineTraceError

__version__ = _version("accel-pipeline")

__all__ = ["BACKEND", "PipelineTraceError", "__version__", "find_split_points", "prepare_pippy"]

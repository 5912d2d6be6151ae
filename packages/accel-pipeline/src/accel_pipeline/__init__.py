"""Pipeline-parallel inference (``prepare_pippy``) on ``torch.distributed.pipelining``."""

from importlib.metadata import version as _version

from ._helpers import build_pipeline, find_pippy_batch_size, generate_device_map, pippy_forward
from ._prepare_pippy import prepare_pippy
from ._split_points import find_split_points
from ._trace import BACKEND, PipelineTraceError

__version__ = _version("accel-pipeline")

__all__ = [
    "BACKEND",
    "PipelineTraceError",
    "__version__",
    "build_pipeline",
    "find_pippy_batch_size",
    "find_split_points",
    "generate_device_map",
    "pippy_forward",
    "prepare_pippy",
]

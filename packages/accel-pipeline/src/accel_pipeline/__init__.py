"""Pipeline-parallel inference (``prepare_pippy``) on ``torch.distributed.pipelining``."""

from __future__ import annotations

from accel_state.lazy import lazy_module as _lazy_module

# Public name -> the private module that defines it, loaded on first use: the one list of
# this package's names (__all__ and the type stub beside this file are made from it).
_EXPORTS = {
    "build_pipeline": "._helpers",
    "find_pippy_batch_size": "._helpers",
    "generate_device_map": "._helpers",
    "pippy_forward": "._helpers",
    "prepare_pippy": "._prepare_pippy",
    "find_split_points": "._split_points",
    "BACKEND": "._trace",
    "PipelineTraceError": "._trace",
}

# Read from the installed metadata on first access.
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

__getattr__, __dir__ = _lazy_module(globals(), _EXPORTS, distribution="accel-pipeline")

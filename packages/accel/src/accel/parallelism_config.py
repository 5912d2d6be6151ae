"""``accel.parallelism_config``: the names of the reference's ``accelerate.parallelism_config``
(transformers' ``TrainingArguments`` imports ``ParallelismConfig`` from it)."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.parallelism_config"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

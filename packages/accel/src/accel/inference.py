"""``accel.inference``: distributed inference helpers (pipeline parallelism)."""

from __future__ import annotations

from ._exports import INFERENCE as _INFERENCE
from ._lazy import lazy_module

__all__ = sorted(_INFERENCE)

__getattr__, __dir__ = lazy_module(globals(), _INFERENCE)

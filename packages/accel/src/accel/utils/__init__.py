"""``accel.utils``: the utilities of every accel package under one documented path."""

from __future__ import annotations

from .._exports import UTILS as _UTILS
from .._lazy import lazy_module

__all__ = sorted(_UTILS)

__getattr__, __dir__ = lazy_module(globals(), _UTILS)

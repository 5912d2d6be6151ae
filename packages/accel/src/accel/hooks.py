"""``accel.hooks``: module hooks for device alignment and offload (from accel-bigmodel)."""

from __future__ import annotations

from ._exports import HOOKS as _HOOKS
from ._lazy import lazy_module

__all__ = sorted(_HOOKS)

__getattr__, __dir__ = lazy_module(globals(), _HOOKS)

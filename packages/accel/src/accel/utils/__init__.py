"""``accel.utils``: the utilities of every accel package under one documented path."""

from __future__ import annotations

from accel_state.lazy import lazy_module

from .._reexports._public_names import UTILS as _EXPORTS

__all__ = sorted(_EXPORTS)

# The reference library's ``accelerate.utils.<name>`` paths, importable as attributes too.
_SUBMODULES = (
    "ao bnb constants dataclasses deepspeed environment fsdp_utils imports launch megatron_lm memory "
    "modeling offload operations other random tqdm versions"
).split()

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS, submodules=_SUBMODULES)

# ``accel.utils.tqdm`` is both a module and the function it holds: binding the function now
# keeps it the package attribute even after ``import accel.utils.tqdm``. Nothing heavy loads.
from .tqdm import tqdm  # noqa: E402

"""accel: run any PyTorch script on one CPU, many processes, many machines, DeepSpeed or FSDP,
in mixed precision, and run models too big for one device.

Every public name is loaded on first use, so ``import accel`` costs little more than
``import torch``.
"""

from __future__ import annotations

from accel_state.lazy import lazy_module

from ._reexports._public_names import TOP_LEVEL as _EXPORTS

# Read from the installed metadata on first access (see lazy_module).
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

# The reference library's module paths, importable as attributes too (``accel.state``).
_SUBMODULES = (
    "accelerator big_modeling checkpointing data_loader hooks inference launchers local_sgd logging "
    "optimizer parallelism_config "
    "scheduler state test_utils tracking utils"
).split()

__getattr__, __dir__ = lazy_module(
    globals(), _EXPORTS, submodules=_SUBMODULES, distribution="accel-torch"
)

"""accel: run any PyTorch script on one CPU, many processes, many machines, DeepSpeed or FSDP,
in mixed precision, and run models too big for one device.

Every public name is loaded on first use, so ``import accel`` costs little more than
``import torch``.
"""

from __future__ import annotations

from importlib.metadata import version as _version
from typing import TYPE_CHECKING

from ._exports import TOP_LEVEL as _TOP_LEVEL
from ._lazy import lazy_module

__version__ = _version("accel")

__all__ = ["__version__", *sorted(_TOP_LEVEL)]

__getattr__, __dir__ = lazy_module(globals(), _TOP_LEVEL)

if TYPE_CHECKING:
    from accel_data import DataLoaderConfiguration, skip_first_batches
    from accel_state import (
        AcceleratorState,
        AutocastKwargs,
        DeepSpeedPlugin,
        DistributedDataParallelKwargs,
        DistributedType,
        GradientState,
        GradScalerKwargs,
        InitProcessGroupKwargs,
        PartialState,
        ProfileKwargs,
        find_executable_batch_size,
    )

    from ._accelerator import Accelerator
    from ._accelerator_prepare import compile_regions
    from ._optim import AcceleratedOptimizer, AcceleratedScheduler

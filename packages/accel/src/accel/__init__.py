"""accel: run any PyTorch script on one CPU, many processes, many machines, DeepSpeed or FSDP,
in mixed precision, and run models too big for one device.

Every public name is loaded on first use, so ``import accel`` costs little more than
``import torch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._exports import TOP_LEVEL as _EXPORTS

# Read from the installed metadata on first access (see lazy_module).
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

# The reference library's module paths, importable as attributes too (``accel.state``).
_SUBMODULES = (
    "big_modeling checkpointing data_loader hooks inference launchers local_sgd logging "
    "optimizer parallelism_config "
    "scheduler state tracking utils"
).split()

__getattr__, __dir__ = lazy_module(
    globals(), _EXPORTS, submodules=_SUBMODULES, distribution="accel-torch"
)

if TYPE_CHECKING:
    from accel_bigmodel import (
        CheckpointKeysError,
        CorruptSafetensorsError,
        DeviceMapError,
        OffloadedFileChangedError,
        PathOutsideCheckpointError,
        UntrustedPickleError,
        cpu_offload,
        cpu_offload_with_hook,
        disk_offload,
        dispatch_model,
        infer_auto_device_map,
        init_empty_weights,
        init_on_device,
        load_checkpoint_and_dispatch,
        load_checkpoint_in_model,
    )
    from accel_collectives import DistributedOperationException
    from accel_data import (
        DataLoaderConfiguration,
        skip_first_batches,
    )
    from accel_launch import (
        ConfigError,
        notebook_launcher,
    )
    from accel_pipeline import (
        PipelineTraceError,
        prepare_pippy,
    )
    from accel_state import (
        AcceleratorState,
        AutocastKwargs,
        DDPCommunicationHookType,
        DeepSpeedPlugin,
        DistributedDataParallelKwargs,
        DistributedType,
        FullyShardedDataParallelPlugin,
        GradientState,
        GradScalerKwargs,
        InitProcessGroupKwargs,
        ParallelismConfig,
        PartialState,
        ProfileKwargs,
        debug_launcher,
        find_executable_batch_size,
        is_rich_available,
        synchronize_rng_states,
    )

    from accel._accelerator import (
        Accelerator,
    )
    from accel._accelerator_prepare import (
        compile_regions,
    )
    from accel._as_accelerate import (
        ACCELERATE_API_VERSION,
        AccelerateAlreadyImportedError,
        AccelerateShadowedWarning,
        install_as_accelerate,
        is_installed_as_accelerate,
    )
    from accel._checkpoint_async import AsyncSaveError
    from accel._checkpoint_load import StateRefusedError
    from accel._checkpoint_manifest import (
        CheckpointIntegrityError,
    )
    from accel._checkpoint_sync import (
        CheckpointSyncError,
    )
    from accel._checkpointing import CheckpointWriteError
    from accel._local_sgd import (
        LocalSGD,
    )
    from accel._optim import (
        AcceleratedOptimizer,
        AcceleratedScheduler,
    )
    from accel._state_files import (
        UnsafeCheckpointError,
    )

"""accel: run any PyTorch script on one CPU, many processes, many machines, DeepSpeed or FSDP,
in mixed precision, and run models too big for one device.

Every public name is loaded on first use, so ``import accel`` costs little more than
``import torch``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._public_names import TOP_LEVEL as _EXPORTS

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

    from accel._checkpoint._async_save import AsyncSaveError
    from accel._checkpoint._load import StateRefusedError
    from accel._checkpoint._manifest import (
        CheckpointIntegrityError,
    )
    from accel._checkpoint._process_files import CheckpointWriteError
    from accel._checkpoint._rendezvous import (
        CheckpointSyncError,
    )
    from accel._checkpoint._state_files import (
        UnsafeCheckpointError,
    )
    from accel._facade._accelerator import (
        Accelerator,
    )
    from accel._facade._local_sgd import (
        LocalSGD,
    )
    from accel._facade._optimizer_wrappers import (
        AcceleratedOptimizer,
        AcceleratedScheduler,
    )
    from accel._facade._prepare import (
        compile_regions,
    )
    from accel._reexports._as_accelerate import (
        ACCELERATE_API_VERSION,
        AccelerateAlreadyImportedError,
        AccelerateShadowedWarning,
        install_as_accelerate,
        is_installed_as_accelerate,
    )

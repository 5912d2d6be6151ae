"""``accel.data_loader``: the names of the reference's ``accelerate.data_loader``, from the accel packages
that own them."""

# ruff: noqa: F401 - the typing block re-exports names for type checkers

from __future__ import annotations

from typing import TYPE_CHECKING

from accel_state.lazy import lazy_module

from ._reexports._module_paths import PATHS

_EXPORTS = PATHS["accel.data_loader"]

__all__ = sorted(_EXPORTS)

__getattr__, __dir__ = lazy_module(globals(), _EXPORTS)

if TYPE_CHECKING:
    from accel_collectives import (
        broadcast,
        broadcast_object_list,
        concatenate,
        find_batch_size,
        get_data_structure,
        initialize_tensors,
        send_to_device,
        slice_tensors,
    )
    from accel_data import (
        BatchSamplerShard,
        DataLoaderAdapter,
        DataLoaderDispatcher,
        DataLoaderShard,
        DataLoaderStateMixin,
        IterableDatasetShard,
        MpDeviceLoaderWrapper,
        SeedableRandomSampler,
        SkipBatchSampler,
        SkipDataLoader,
        get_sampler,
        prepare_data_loader,
        skip_first_batches,
    )
    from accel_state import (
        DistributedType,
        GradientState,
        PartialState,
        RNGType,
        compare_versions,
        get_logger,
        is_datasets_available,
        is_torch_version,
        is_torch_xla_available,
        is_torchdata_stateful_dataloader_available,
        synchronize_rng_states,
    )

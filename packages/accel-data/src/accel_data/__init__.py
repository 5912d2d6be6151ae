"""Sharded, dispatched and resumable DataLoaders for accel.

``prepare_data_loader`` turns a DataLoader into the loader of one process; ``gather_for_metrics``
gathers per-sample results without the samples repeated to even out the last step;
``skip_first_batches`` and the loaders' ``state_dict`` resume an epoch exactly where it stopped.
"""

from __future__ import annotations

from accel_state.lazy import lazy_module as _lazy_module

# Public name -> the private module that defines it, loaded on first use: the one list of
# this package's names (__all__ and the type stub beside this file are made from it).
_EXPORTS = {
    "DataLoaderAdapter": ".loaders._adapter",
    "get_sampler": ".loaders._adapter",
    "DataLoaderDispatcher": ".loaders._dispatcher_loader",
    "override_even_batches": "._even_batches",
    "IterableDatasetShard": ".sharding._iterable",
    "DataLoaderConfiguration": "._loader_config",
    "DataLoaderShard": ".loaders._loaders",
    "gather_for_metrics": "._metrics",
    "prepare_data_loader": "._prepare_loader",
    "BatchSamplerShard": ".sharding._samplers",
    "SeedableRandomSampler": ".sharding._samplers",
    "SkipBatchSampler": "._skip",
    "SkipDataLoader": "._skip",
    "skip_first_batches": "._skip",
    "DataLoaderStateMixin": ".loaders._state_mixin",
    "MpDeviceLoaderWrapper": ".loaders._xla_loader",
}

# Read from the installed metadata on first access.
__version__: str

__all__ = ["__version__", *sorted(_EXPORTS)]

__getattr__, __dir__ = _lazy_module(globals(), _EXPORTS, distribution="accel-data")

"""Sharded, dispatched and resumable DataLoaders for accel.

``prepare_data_loader`` turns a DataLoader into the loader of one process; ``gather_for_metrics``
gathers per-sample results without the samples repeated to even out the last step;
``skip_first_batches`` and the loaders' ``state_dict`` resume an epoch exactly where it stopped.
"""

from importlib.metadata import version as _version

from ._adapter import DataLoaderAdapter, get_sampler
from ._dispatcher_loader import DataLoaderDispatcher
from ._even_batches import override_even_batches
from ._iterable import IterableDatasetShard
from ._loader_config import DataLoaderConfiguration
from ._loaders import DataLoaderShard
from ._metrics import gather_for_metrics
from ._prepare_loader import prepare_data_loader
from ._samplers import BatchSamplerShard, SeedableRandomSampler
from ._skip import SkipBatchSampler, SkipDataLoader, skip_first_batches
from ._state_mixin import DataLoaderStateMixin
from ._xla_loader import MpDeviceLoaderWrapper

__version__ = _version("accel-data")

__all__ = [
    "override_even_batches",
    "BatchSamplerShard",
    "DataLoaderAdapter",
    "DataLoaderConfiguration",
    "DataLoaderDispatcher",
    "DataLoaderShard",
    "DataLoaderStateMixin",
    "IterableDatasetShard",
    "MpDeviceLoaderWrapper",
    "SeedableRandomSampler",
    "SkipBatchSampler",
    "SkipDataLoader",
    "__version__",
    "gather_for_metrics",
    "get_sampler",
    "prepare_data_loader",
    "skip_first_batches",
]

"""``prepare_data_loader``: turn a DataLoader into the loader of one process."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import torch
import torch.distributed as dist
from accel_state import PartialState, RNGType
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler

from .loaders._dispatcher_loader import DataLoaderDispatcher
from .loaders._loaders import DataLoaderShard
from .loaders._xla_loader import MpDeviceLoaderWrapper
from .sharding._comm import broadcast_object
from .sharding._iterable import IterableDatasetShard
from .sharding._mesh import mesh_data_ranks
from .sharding._samplers import BatchSamplerShard, SeedableRandomSampler


def _shards_natively(dataset: Any, num_processes: int, split_batches: bool) -> bool:
    """Whether ``dataset`` is a ``datasets.IterableDataset`` with a shard for every process.

    ``datasets`` is not imported here: a dataset of that type means the module is loaded.
    """
    module = sys.modules.get("datasets")
    kind = getattr(module, "IterableDataset", None) if module is not None else None
    return (
        isinstance(kind, type)
        and isinstance(dataset, kind)
        and not split_batches
        and getattr(dataset, "n_shards", 0) >= num_processes
    )


def loader_settings(dataloader: DataLoader) -> dict[str, Any]:
    """The DataLoader arguments that do not decide which samples form a batch."""
    settings: dict[str, Any] = {
        "num_workers": dataloader.num_workers,
        "collate_fn": dataloader.collate_fn,
        "pin_memory": dataloader.pin_memory,
        "timeout": dataloader.timeout,
        "worker_init_fn": dataloader.worker_init_fn,
        "multiprocessing_context": dataloader.multiprocessing_context,
        "generator": dataloader.generator,
        "prefetch_factor": dataloader.prefetch_factor,
        "persistent_workers": dataloader.persistent_workers,
        "pin_memory_device": dataloader.pin_memory_device,
    }
    if hasattr(dataloader, "in_order"):
        settings["in_order"] = dataloader.in_order
    return settings


def _agreed_seed(local_seed: int) -> int:
    # Every process must shuffle alike; the main process's seed wins.
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        return int(broadcast_object(local_seed))
    return local_seed


def _agree_state(generator: torch.Generator) -> None:
    # Every process must shuffle alike; the main process's generator state wins.
    if dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1:
        generator.set_state(broadcast_object(generator.get_state()))


def _draw_seed(generator: torch.Generator | None) -> int:
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def _order_sampler(
    sampler: Any, use_seedable_sampler: bool, data_seed: int | None
) -> tuple[Any, torch.Generator | None]:
    """A sampler whose order is the same on every process and can be replayed.

    A ``RandomSampler`` becomes a ``SeedableRandomSampler`` (``use_seedable_sampler``); otherwise
    it keeps the caller's generator (its state copied from the main process) or, without one,
    gets a generator of its own, seeded alike on every process. Other samplers are kept.
    """
    if type(sampler) is not RandomSampler:
        if isinstance(sampler, SeedableRandomSampler) and data_seed is None:
            sampler.initial_seed = _agreed_seed(sampler.initial_seed)
        return sampler, getattr(sampler, "generator", None)
    if use_seedable_sampler:
        seed = data_seed
        if seed is None:
            base = sampler.generator
            seed = int(base.initial_seed()) if base is not None else torch.random.initial_seed()
            seed = _agreed_seed(seed)
        seedable = SeedableRandomSampler(
            sampler.data_source,
            replacement=sampler.replacement,
            num_samples=sampler._num_samples,
            data_seed=seed,
        )
        return seedable, None
    if sampler.generator is not None:
        # The order follows the caller's generator, as in a plain DataLoader: reseeding it after
        # prepare sets the next pass's order. Every process starts from the main one's state.
        _agree_state(sampler.generator)
        return sampler, sampler.generator
    generator = torch.Generator()
    generator.manual_seed(_agreed_seed(_draw_seed(None)))
    new = RandomSampler(
        sampler.data_source,
        replacement=sampler.replacement,
        num_samples=sampler._num_samples,
        generator=generator,
    )
    return new, generator


def prepare_data_loader(
    dataloader: DataLoader,
    device: torch.device | str | None = None,
    num_processes: int | None = None,
    process_index: int | None = None,
    split_batches: bool = False,
    put_on_device: bool = False,
    rng_types: list[str | RNGType] | None = None,
    dispatch_batches: bool | None = None,
    even_batches: bool = True,
    slice_fn_for_dispatch: Callable[..., Any] | None = None,
    use_seedable_sampler: bool = False,
    data_seed: int | None = None,
    non_blocking: bool = False,
    use_stateful_dataloader: bool = False,
    torch_device_mesh: Any = None,
) -> DataLoaderShard | DataLoaderDispatcher | MpDeviceLoaderWrapper:
    """Wrap ``dataloader`` so that this process reads its share of every step.

    Map-style datasets are sharded through the batch sampler (``BatchSamplerShard``): every
    process walks the same order and keeps its own batches, or its part of each batch with
    ``split_batches``. Iterable datasets placed on the device (``put_on_device``) are dispatched
    by default: the main process reads each step and sends every process its slice
    (``DataLoaderDispatcher``); otherwise every process reads the stream and keeps its part
    (``IterableDatasetShard``), except a ``datasets.IterableDataset`` with at least
    ``num_processes`` shards (and no ``split_batches``): each process then reads only its own
    shards (``dataset.shard(num_processes, process_index)``). Every setting of ``dataloader`` (workers, ``collate_fn``,
    ``pin_memory``, ``drop_last`` ...) carries over.

    Args:
        dataloader: The DataLoader to prepare.
        device: Where batches go when ``put_on_device`` (default: the state's device).
        num_processes: Number of processes (default: the state's).
        process_index: Index of this process (default: the state's).
        split_batches: The loader's batch size is the global one, cut in ``num_processes``
            parts; it must be a multiple of ``num_processes``.
        put_on_device: Move every batch to ``device``.
        rng_types: Generators synchronised from the main process at the start of each pass
            (``"torch"``, ``"cuda"``, ``"xpu"``, ``"generator"``).
        dispatch_batches: Main process reads and dispatches (default: for iterable datasets
            when ``put_on_device``).
        even_batches: Every process gets the same number of equal batches; the processes that
            run out first loop back to the start of the data (``gather_for_metrics`` drops
            those samples again).
        slice_fn_for_dispatch: ``fn(batch, slice, process_index, num_processes)`` cutting a
            dispatched batch.
        use_seedable_sampler: Replace a shuffling sampler by ``SeedableRandomSampler``.
        data_seed: Seed of that sampler (default: the main process's initial seed).
        non_blocking: Move batches with ``non_blocking=True`` (with ``pin_memory=True``).
        use_stateful_dataloader: Build the loader on torchdata's ``StatefulDataLoader``
            (``pip install "accel-data[stateful]"``): its ``state_dict`` also holds the workers'
            state (base seed, batches produced, each worker's dataset ``state_dict``), so an
            epoch resumed with ``num_workers > 0`` continues exactly. Without it, prepared
            loaders resume by position only (same order, workers started afresh).
        torch_device_mesh: A ``torch.distributed.DeviceMesh``: the ranks of one tensor- (and
            context-) parallel group read the same batches, the data-parallel dimensions
            (``dp_replicate`` x ``dp_shard``) the different ones. Under DeepSpeed only the
            ``tp`` dimension is divided out. Not combinable with ``dispatch_batches=True``.

    Returns:
        A ``DataLoaderShard`` or a ``DataLoaderDispatcher``; on an XLA device a sharded loader
        comes wrapped in an ``MpDeviceLoaderWrapper``.
    """
    if not isinstance(dataloader, DataLoader):
        raise TypeError(
            f"prepare_data_loader needs a torch.utils.data.DataLoader; got "
            f"{type(dataloader).__name__}. Wrap the dataset in a DataLoader first."
        )
    if num_processes is None or process_index is None or (put_on_device and device is None):
        state = PartialState()
        num_processes = state.num_processes if num_processes is None else num_processes
        process_index = state.process_index if process_index is None else process_index
        if put_on_device and device is None:
            device = state.device
    dataset = dataloader.dataset
    iterable = isinstance(dataset, IterableDataset)
    if dispatch_batches is None:
        dispatch_batches = put_on_device and iterable
    if torch_device_mesh is not None:
        if dispatch_batches:
            raise ValueError(
                "prepare_data_loader shards by device mesh only without dispatching; got "
                "dispatch_batches=True with a torch_device_mesh. Pass dispatch_batches=False."
            )
        num_processes, process_index = mesh_data_ranks(
            torch_device_mesh, num_processes, process_index
        )
    if not 0 <= process_index < num_processes:
        raise ValueError(
            f"process_index must lie in [0, num_processes); got process_index={process_index}, "
            f"num_processes={num_processes}. Pass the rank and the world size."
        )
    target_device = device if put_on_device else None
    settings = loader_settings(dataloader)
    batch_size = dataloader.batch_size

    if split_batches and batch_size is not None and batch_size % num_processes != 0:
        raise ValueError(
            f"split_batches needs a batch size that is a round multiple of the number of "
            f"processes; got batch_size={batch_size}, num_processes={num_processes}. Use a multiple of "
            f"{num_processes} or split_batches=False."
        )

    # ---------------------------------------------------------------------- the order
    synchronized_generator: torch.Generator | None = None
    batch_sampler = dataloader.batch_sampler
    # A BatchSampler given as the sampler of a loader without batch_size: its index lists are
    # the batches (the dataset takes a list of indices); it is sharded like a batch sampler.
    sampler_batches = batch_sampler is None and isinstance(dataloader.sampler, BatchSampler)
    if sampler_batches and not dispatch_batches:
        batch_sampler = dataloader.sampler
    if not iterable:
        if batch_sampler is None:
            raise ValueError(
                "prepare_data_loader shards map-style datasets by batch; the DataLoader has "
                "batch_size=None. Give it a batch_size (or a batch_sampler)."
            )
        if type(batch_sampler) is BatchSampler:
            sampler, synchronized_generator = _order_sampler(
                batch_sampler.sampler, use_seedable_sampler, data_seed
            )
            batch_sampler = BatchSampler(sampler, batch_sampler.batch_size, batch_sampler.drop_last)
        else:
            inner = getattr(batch_sampler, "sampler", None)
            synchronized_generator = getattr(inner, "generator", None)

    # -------------------------------------------------------------------- dispatching
    if dispatch_batches:
        kwargs: dict[str, Any] = dict(settings)
        if iterable:
            kwargs.update(batch_size=batch_size, drop_last=dataloader.drop_last)
        else:
            kwargs["batch_sampler"] = batch_sampler
        dispatcher = DataLoaderDispatcher(
            dataset,
            split_batches=split_batches,
            use_stateful_dataloader=use_stateful_dataloader,
            _drop_last=dataloader.drop_last,
            _non_blocking=non_blocking,
            slice_fn=slice_fn_for_dispatch,
            even_batches=even_batches,
            device=target_device,
            num_processes=num_processes,
            process_index=process_index,
            **kwargs,
        )
        dispatcher._position_format = True  # save the position around torchdata's state
        return dispatcher

    # ----------------------------------------------------------------------- sharding
    if iterable:
        if num_processes > 1 and _shards_natively(dataset, num_processes, split_batches):
            # Each process reads only its own shards of a datasets.IterableDataset.
            shardable: Any = dataset
            dataset = shardable.shard(num_shards=num_processes, index=process_index)
        elif num_processes > 1:
            if batch_size is None:
                raise ValueError(
                    "sharding an iterable dataset needs a batch_size; the DataLoader has "
                    "batch_size=None. Give it a batch_size or use dispatch_batches=True."
                )
            dataset = IterableDatasetShard(
                dataset,
                batch_size=batch_size,
                drop_last=dataloader.drop_last,
                num_processes=num_processes,
                process_index=process_index,
                split_batches=split_batches,
                even_batches=even_batches,
            )
            batch_size = dataset.process_batch_size
        loader_kwargs: dict[str, Any] = dict(
            settings, batch_size=batch_size, drop_last=dataloader.drop_last
        )
    else:
        assert batch_sampler is not None
        shard = BatchSamplerShard(
            batch_sampler,
            num_processes=num_processes,
            process_index=process_index,
            split_batches=split_batches,
            even_batches=even_batches,
        )
        if sampler_batches:
            loader_kwargs = dict(settings, sampler=shard, batch_size=None)
        else:
            loader_kwargs = dict(settings, batch_sampler=shard)
    on_xla = target_device is not None and torch.device(target_device).type == "xla"
    loader = DataLoaderShard(
        dataset,
        device=None if on_xla else target_device,
        rng_types=rng_types,
        synchronized_generator=synchronized_generator,
        use_stateful_dataloader=use_stateful_dataloader,
        _drop_last=dataloader.drop_last,
        _non_blocking=non_blocking,
        **loader_kwargs,
    )
    loader._position_format = True  # save the position around torchdata's state
    if on_xla:
        # torch_xla's loader moves the batches (ahead of use) and marks a step per batch.
        return MpDeviceLoaderWrapper(loader, torch.device(str(target_device)))
    return loader

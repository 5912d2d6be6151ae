"""``DataLoaderConfiguration``: how ``prepare_data_loader`` shards and places the data."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DataLoaderConfiguration:
    """Settings of the prepared dataloaders of a run.

    ``Accelerator(dataloader_config=...)`` takes one of these; ``prepare_data_loader`` accepts the
    same settings as keyword arguments (``prepare_data_loader(loader, **asdict(config))``).
    """

    split_batches: bool = False
    """Whether the loader's batch size is the global batch size, split between the processes.

    False (default): every process reads batches of the loader's batch size, so one step consumes
    ``batch_size * num_processes`` samples. True: each batch of the loader is cut into
    ``num_processes`` equal parts, so the batch size must be a multiple of ``num_processes``.
    """

    dispatch_batches: bool | None = None
    """Whether the main process reads every batch and sends each process its slice.

    None (default): dispatch for iterable datasets, shard the sampler for map-style datasets.
    """

    even_batches: bool = True
    """Whether every process gets the same number of batches of the same size.

    True (default): the processes that run out first loop back to the start of the data, and
    ``gather_for_metrics`` drops those repeated samples. False: the last batches are uneven and
    some processes may get one batch fewer.
    """

    use_seedable_sampler: bool = False
    """Whether a shuffling sampler is replaced by ``SeedableRandomSampler``.

    The order then depends only on the seed and the epoch, the same on every process and on a
    resumed run.
    """

    data_seed: int | None = None
    """Seed of ``SeedableRandomSampler``; None uses the main process's initial torch seed."""

    non_blocking: bool = False
    """Whether batches move to the device with ``non_blocking=True`` (needs ``pin_memory=True``
    on the DataLoader to overlap the copy with compute)."""

    use_stateful_dataloader: bool = False
    """Whether prepared loaders are built on torchdata's ``StatefulDataLoader``.

    Every prepared loader carries its position (epoch, batches yielded, sampler seed) and
    resumes mid-epoch in the same order. A stateful one also saves its workers' state (base
    seed, batches each worker produced, each worker's dataset ``state_dict``), so that a
    dataset whose workers hold state (augmentation from a worker generator) continues exactly.
    Needs ``pip install "accel-data[stateful]"``.
    """

    def __post_init__(self) -> None:
        for name in ("split_batches", "even_batches", "use_seedable_sampler", "non_blocking"):
            value = getattr(self, name)
            if not isinstance(value, bool):
                raise TypeError(
                    f"DataLoaderConfiguration.{name} must be a bool; got {value!r}. "
                    f"Pass {name}=True or {name}=False."
                )
        if self.dispatch_batches is not None and not isinstance(self.dispatch_batches, bool):
            raise TypeError(
                "DataLoaderConfiguration.dispatch_batches must be None or a bool; got "
                f"{self.dispatch_batches!r}. Pass None to choose by dataset type."
            )
        if self.data_seed is not None and (
            not isinstance(self.data_seed, int) or isinstance(self.data_seed, bool)
        ):
            raise TypeError(
                f"DataLoaderConfiguration.data_seed must be None or an int; got "
                f"{self.data_seed!r}. Pass e.g. data_seed=42."
            )

"""The reference library's loader API in one process: ``DataLoaderStateMixin``,
``gradient_state``, ``iteration``, ``set_epoch`` forwarding, ``remainder``, sampler access and
the arguments refused with a reason."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
from accel_state import GradientState
from torch.utils.data import BatchSampler, DataLoader, Dataset, SequentialSampler

from accel_data import (
    BatchSamplerShard,
    DataLoaderDispatcher,
    DataLoaderShard,
    DataLoaderStateMixin,
    SeedableRandomSampler,
    SkipDataLoader,
    gather_for_metrics,
    prepare_data_loader,
)


class EpochBatchSampler(BatchSampler):
    """A custom batch sampler that records the epochs it is given."""

    def __init__(self, length: int, batch_size: int) -> None:
        super().__init__(SequentialSampler(range(length)), batch_size, False)
        self.epochs: list[int] = []

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


class EpochDataset(Dataset):
    """A map-style dataset with ``set_epoch`` (as ``datasets.Dataset`` has)."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.epochs: list[int] = []

    def __getitem__(self, index: int) -> int:
        return index

    def __len__(self) -> int:
        return self.length

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


@pytest.mark.parametrize("num_processes", [1, 2])
def test_set_epoch_reaches_a_custom_batch_sampler_and_the_dataset(num_processes: int) -> None:
    dataset = EpochDataset(8)
    batch_sampler = EpochBatchSampler(8, 2)
    prepared = prepare_data_loader(
        DataLoader(dataset, batch_sampler=batch_sampler),
        num_processes=num_processes,
        process_index=0,
    )
    prepared.set_epoch(3)
    assert batch_sampler.epochs == [3] and dataset.epochs == [3]
    assert prepared.iteration == 3
    list(prepared)  # a pass starts with set_epoch(iteration), then moves to the next epoch
    assert batch_sampler.epochs == [3, 3] and prepared.iteration == 4
    list(prepared)
    assert batch_sampler.epochs[-1] == 4 and dataset.epochs[-1] == 4


def test_iteration_is_an_argument_and_an_attribute() -> None:
    sampler = SeedableRandomSampler(range(6), data_seed=1)
    loader = DataLoaderShard(range(6), batch_sampler=BatchSampler(sampler, 2, False), iteration=5)
    assert loader.iteration == 5
    first = [b.tolist() for b in loader]
    assert sampler.epoch == 6 and loader.iteration == 6
    loader.iteration = 5
    assert [b.tolist() for b in loader] == first
    assert isinstance(loader.gradient_state, GradientState)


def test_remainder_is_known_from_the_start_of_the_pass() -> None:
    prepared = prepare_data_loader(
        DataLoader(list(range(10)), batch_size=2), num_processes=2, process_index=0
    )
    seen = [(prepared.remainder, prepared.end_of_dataloader) for _ in prepared]
    assert seen == [(2, False), (2, False), (2, True)]
    assert prepared.total_batch_size == 4 and prepared.total_dataset_length == 10
    dropped = prepare_data_loader(
        DataLoader(list(range(10)), batch_size=2, drop_last=True), num_processes=2, process_index=0
    )
    assert {dropped.remainder for _ in dropped} == {-1}


def test_the_last_batch_is_gathered_without_repeats_in_one_process() -> None:
    prepared = prepare_data_loader(DataLoader(torch.arange(7), batch_size=3))
    assert torch.cat([gather_for_metrics(b) for b in prepared]).tolist() == list(range(7))


class CountingLoader(DataLoaderStateMixin, DataLoader):
    """A user's loader built on the mixin, as the reference documents it."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.gradient_state = GradientState()
        self._drop_last = False
        self.total_batch_size = self.batch_size

    def __iter__(self) -> Iterator:  # type: ignore[override]
        self.begin()
        batches = list(super().__iter__())
        for index, batch in enumerate(batches):
            self.end_of_dataloader = index == len(batches) - 1
            yield batch
        self.end()


def test_a_user_loader_on_the_mixin_drives_gradient_state() -> None:
    loader = CountingLoader(torch.arange(5), batch_size=2)
    state = GradientState()
    seen = []
    for batch in loader:
        assert state.active_dataloader is loader
        seen.append((state.end_of_dataloader, state.remainder))
        gathered = gather_for_metrics(batch)
    assert seen == [(False, 1), (False, 1), (True, 1)]
    assert gathered.tolist() == [4]
    assert not state.in_dataloader
    loader.reset()
    assert (loader.end_of_dataloader, loader.remainder) == (False, -1)


def test_skip_data_loader_is_a_stateful_loader() -> None:
    loader = SkipDataLoader(list(range(7)), skip_batches=1, batch_size=2)
    assert isinstance(loader, DataLoaderStateMixin)
    state = GradientState()
    flags = []
    for _ in loader:
        assert state.active_dataloader is loader
        flags.append(loader.end_of_dataloader)
    assert flags == [False, False, True]
    assert len(list(loader)) == 4  # the skip applied to one pass
    assert not loader.use_stateful_dataloader
    # With use_stateful_dataloader=True it is built on torchdata (test_stateful_direct.py).


def test_get_and_set_sampler_reach_the_sampler_inside_the_shard() -> None:
    prepared = prepare_data_loader(
        DataLoader(list(range(8)), batch_size=2), num_processes=2, process_index=1
    )
    assert isinstance(prepared.batch_sampler, BatchSamplerShard)
    assert isinstance(prepared.get_sampler(), SequentialSampler)
    seeded = SeedableRandomSampler(range(8), data_seed=3)
    prepared.set_sampler(seeded)
    assert prepared.get_sampler() is seeded
    order = list(SeedableRandomSampler(range(8), data_seed=3))
    assert [b.tolist() for b in prepared] == [order[2:4], order[6:8]]


def test_a_device_mesh_on_a_loader_class_is_refused_with_the_fix() -> None:
    mesh = object()
    with pytest.raises(ValueError, match="prepare_data_loader"):
        DataLoaderShard(range(4), torch_device_mesh=mesh)
    with pytest.raises(ValueError, match="dispatch_batches=False"):
        DataLoaderDispatcher(range(4), torch_device_mesh=mesh, num_processes=1, process_index=0)
    with pytest.raises(ValueError, match="dispatch_batches=False"):
        prepare_data_loader(
            DataLoader(range(4)),
            num_processes=1,
            process_index=0,
            dispatch_batches=True,
            torch_device_mesh=mesh,
        )


def test_a_mesh_without_dimension_names_is_refused() -> None:
    class Unnamed:
        mesh_dim_names = None

    with pytest.raises(ValueError, match="mesh_dim_names"):
        prepare_data_loader(
            DataLoader(range(4)), num_processes=2, process_index=0, torch_device_mesh=Unnamed()
        )


def test_a_batch_sampler_of_no_fixed_size_is_dealt_whole() -> None:
    batches = [[0], [1, 2, 3], [4, 5], [6, 7, 8, 9], [10]]
    shards = [BatchSamplerShard(batches, 2, i, even_batches=True) for i in range(2)]
    # the incomplete last round is completed with whole batches from the start
    assert [list(s) for s in shards] == [[[0], [4, 5], [10]], [[1, 2, 3], [6, 7, 8, 9], [0]]]
    uneven = [list(BatchSamplerShard(batches, 2, i, even_batches=False)) for i in range(2)]
    assert uneven == [[[0], [4, 5], [10]], [[1, 2, 3], [6, 7, 8, 9]]]


def test_skip_batches_is_readable_and_applies_to_the_next_pass() -> None:
    loader = DataLoaderShard(list(range(8)), skip_batches=2, batch_size=2)
    assert loader.skip_batches == 2 and len(loader) == 2
    assert [b.tolist() for b in loader] == [[4, 5], [6, 7]]
    assert loader.skip_batches == 0 and len(loader) == 4
    loader.skip_batches = 3
    assert [b.tolist() for b in loader] == [[6, 7]]
    with pytest.raises(ValueError, match="int >= 0; got -1"):
        loader.skip_batches = -1

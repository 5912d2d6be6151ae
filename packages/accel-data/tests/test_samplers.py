"""Sharding rules checked in one process by building every process's shard explicitly."""

from __future__ import annotations

import itertools

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, SequentialSampler

from accel_data import (
    BatchSamplerShard,
    IterableDatasetShard,
    SeedableRandomSampler,
    prepare_data_loader,
)


def _shards(n: int, bs: int, world: int, split: bool, even: bool, drop_last: bool):
    base = BatchSampler(SequentialSampler(range(n)), bs, drop_last)
    return [
        BatchSamplerShard(base, world, rank, split_batches=split, even_batches=even)
        for rank in range(world)
    ]


def _steps(per_rank: list[list[list[int]]]) -> list[list[int]]:
    """Per step, the concatenation of every process's batch in process order."""
    return [sum(step, []) for step in zip(*per_rank)]


CASES = [
    (n, bs, world, split)
    for n in range(1, 14)
    for bs in range(1, 5)
    for world in (2, 3)
    for split in (False, True)
    if not split or bs % world == 0
]


def test_even_batches_cover_the_data_once_with_duplicates_only_at_the_end() -> None:
    for case in CASES:
        _check_even(*case)


def _check_even(n: int, bs: int, world: int, split: bool) -> None:
    shards = _shards(n, bs, world, split, even=True, drop_last=False)
    per_rank = [list(shard) for shard in shards]
    assert len({len(batches) for batches in per_rank}) == 1
    for shard, batches in zip(shards, per_rank):
        assert len(shard) == len(batches)
        per = bs // world if split else bs
        assert all(len(b) == per for b in batches)
    steps = _steps(per_rank)
    remainder = shards[0].remainder
    assert all(shard.remainder == remainder for shard in shards)
    flat = sum(steps[:-1], []) + steps[-1][:remainder]
    assert flat == list(range(n)), (n, bs, world, split, steps, remainder)


def test_uneven_batches_repeat_nothing() -> None:
    for n, bs, world, split in CASES:
        shards = _shards(n, bs, world, split, even=False, drop_last=False)
        per_rank = [list(shard) for shard in shards]
        for shard, batches in zip(shards, per_rank):
            assert len(shard) == len(batches), (n, bs, world, split)
        union = sorted(i for batches in per_rank for b in batches for i in b)
        assert union == list(range(n)), (n, bs, world, split, per_rank)


def test_drop_last_gives_only_complete_steps() -> None:
    for case in CASES:
        _check_drop_last(*case)


def _check_drop_last(n: int, bs: int, world: int, split: bool) -> None:
    shards = _shards(n, bs, world, split, even=True, drop_last=True)
    per_rank = [list(shard) for shard in shards]
    steps = _steps(per_rank)
    step_size = bs if split else bs * world
    assert all(len(step) == step_size for step in steps)
    assert sum(steps, []) == list(range(len(steps) * step_size))
    assert len(steps) == (n // bs if split else (n // bs) // world)
    assert all(len(shard) == len(steps) for shard in shards)


def test_single_process_passes_batches_through() -> None:
    base = BatchSampler(SequentialSampler(range(7)), 3, False)
    shard = BatchSamplerShard(base, 1, 0)
    assert list(shard) == [[0, 1, 2], [3, 4, 5], [6]]
    assert shard.remainder == 1


@pytest.mark.parametrize(
    "build",
    [
        lambda: BatchSamplerShard(
            BatchSampler(SequentialSampler(range(7)), 3, False), 2, 0, split_batches=True
        ),
        lambda: IterableDatasetShard(range(7), 3, num_processes=2, split_batches=True),
        lambda: prepare_data_loader(
            DataLoader(range(7), batch_size=3), num_processes=2, process_index=0, split_batches=True
        ),
    ],
    ids=["batch sampler", "iterable shard", "prepare_data_loader"],
)
def test_split_batches_rejects_a_batch_size_that_does_not_divide(build) -> None:
    # The rule keeps the reference's wording ('round multiple'), then the values and the fix.
    with pytest.raises(
        ValueError,
        match=r"round multiple of the number of processes; got batch_size=3, num_processes=2\. "
        r"Use a ",
    ):
        build()


def test_process_index_out_of_range_is_refused() -> None:
    base = BatchSampler(SequentialSampler(range(7)), 3, False)
    with pytest.raises(ValueError, match="process_index=2, num_processes=2"):
        BatchSamplerShard(base, 2, 2)


def test_iterable_shard_matches_the_map_style_rules() -> None:
    for n, bs, world, split, drop_last in itertools.product(
        range(0, 14), (1, 2, 3, 4), (2, 3), (False, True), (False, True)
    ):
        if not split or bs % world == 0:
            _check_iterable(n, bs, world, split, drop_last)


def _check_iterable(n: int, bs: int, world: int, split: bool, drop_last: bool) -> None:
    shards = [
        IterableDatasetShard(range(n), bs, drop_last, world, rank, split_batches=split)
        for rank in range(world)
    ]
    per = bs // world if split else bs
    per_rank = [list(s) for s in shards]
    for shard, samples in zip(shards, per_rank):
        assert len(samples) % per == 0
        assert len(shard) == len(samples)
    batches = [[samples[i : i + per] for i in range(0, len(samples), per)] for samples in per_rank]
    steps = _steps(batches)
    if drop_last or not steps:
        assert sum(steps, []) == list(range(len(sum(steps, []))))
        return
    remainder = shards[0].remainder
    flat = sum(steps[:-1], []) + steps[-1][:remainder]
    assert flat == list(range(n)), (n, bs, world, split, steps, remainder)


def test_seedable_sampler_depends_only_on_seed_and_epoch() -> None:
    data = range(20)
    a = SeedableRandomSampler(data, data_seed=5)
    torch.manual_seed(123)
    b = SeedableRandomSampler(data, data_seed=5)
    first, second = list(a), list(b)
    assert first == second and sorted(first) == list(range(20))
    assert a.epoch == 1  # a full pass moves on to the next epoch
    again = list(a)
    assert again != first and sorted(again) == list(range(20))
    b.set_epoch(1)
    assert list(b) == again
    assert list(SeedableRandomSampler(data, data_seed=6)) != first

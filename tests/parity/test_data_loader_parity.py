"""Differential tests: accel-data's loaders, samplers and shards against the reference library's
(``accelerate.data_loader``) on the same inputs.

Process counts 1-4 are simulated through the ``num_processes`` / ``process_index`` arguments;
``split_between_processes`` has no such arguments and is compared on real gloo processes. Every
difference that remains is deliberate and listed in ``docs/migration-data.md``; the assertions
that check accel's side of such a difference say which entry they belong to.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, IterableDataset, RandomSampler

reference = pytest.importorskip(
    "accelerate.data_loader",
    reason="the reference library is not installed (uv sync --group bench)",
)

import accel_data  # noqa: E402
from accel_state.testing import run_distributed  # noqa: E402

SCRIPTS = Path(__file__).parent / "scripts"
BATCH_SIZES = (1, 2, 3, 4, 6, 8)
LENGTHS = range(0, 30)
PROCESSES = range(1, 5)
FLAGS = list(itertools.product((False, True), repeat=3))


def _ranks() -> Iterator[tuple[int, int]]:
    for n in PROCESSES:
        for i in range(n):
            yield n, i


def _batch_sampler(length: int, batch_size: int, drop_last: bool, seed: int | None = None) -> Any:
    if seed is None:
        return BatchSampler(range(length), batch_size, drop_last)  # type: ignore[arg-type]
    generator = torch.Generator().manual_seed(seed)
    return BatchSampler(RandomSampler(range(length), generator=generator), batch_size, drop_last)


def _length(sampler: Any) -> int | str:
    try:
        return len(sampler)
    except (TypeError, ValueError) as error:
        return type(error).__name__


# ------------------------------------------------------------------------ BatchSamplerShard
@pytest.mark.parametrize(("split", "even", "drop"), FLAGS)
def test_batch_sampler_shard_yields_the_reference_batches(split: bool, even: bool, drop: bool):
    compared = 0
    for batch_size, length, (n, i) in itertools.product(BATCH_SIZES, LENGTHS, _ranks()):
        if split and batch_size % n:
            with pytest.raises(ValueError):
                reference.BatchSamplerShard(_batch_sampler(length, batch_size, drop), n, i, True)
            with pytest.raises(ValueError, match="multiple of the number of processes"):
                accel_data.BatchSamplerShard(_batch_sampler(length, batch_size, drop), n, i, True)
            continue
        for seed in (None, length) if length else (None,):
            case = (batch_size, length, n, i, seed)
            theirs = reference.BatchSamplerShard(
                _batch_sampler(length, batch_size, drop, seed), n, i, split, even
            )
            ours = accel_data.BatchSamplerShard(
                _batch_sampler(length, batch_size, drop, seed), n, i, split, even
            )
            their_len, our_len = _length(theirs), len(ours)
            their_batches, our_batches = list(theirs), list(ours)
            plain = list(_batch_sampler(length, batch_size, drop, seed))
            if n == 1 and even and not drop:
                # migration-data.md "one process": the batch sampler comes back unchanged.
                assert our_batches == plain, case
                assert their_batches[:-1] == plain[:-1], case
            else:
                assert our_batches == their_batches, case
            if split and not even and not drop and n > 1:
                # migration-data.md "len of split uneven shards": len is what the shard yields.
                assert our_len == len(our_batches), case
                assert their_len == len(plain), case
            else:
                assert our_len == their_len, case
            compared += 1
    assert compared > 1000


class VariableBatchSampler:
    """Batches of no fixed size (a bucketing sampler, for example): no ``batch_size``."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes

    def __iter__(self) -> Iterator[list[int]]:
        start = 0
        for size in self.sizes:
            yield list(range(start, start + size))
            start += size

    def __len__(self) -> int:
        return len(self.sizes)


@pytest.mark.parametrize("even", [False, True])
def test_batch_sampler_shard_deals_variable_batches_like_the_reference(even: bool) -> None:
    for sizes in ([1], [2, 3], [3, 1, 2], [1, 2, 3, 4, 5], [2, 2, 2, 1], [4, 1, 1, 3, 2, 5, 1]):
        for n, i in _ranks():
            theirs = reference.BatchSamplerShard(VariableBatchSampler(sizes), n, i, False, even)
            ours = accel_data.BatchSamplerShard(VariableBatchSampler(sizes), n, i, False, even)
            assert len(ours) == len(theirs), (sizes, n, i)
            assert list(ours) == list(theirs), (sizes, n, i)


# --------------------------------------------------------------------- IterableDatasetShard
class Stream(IterableDataset):
    """``range(length)`` as a stream (with a length, so that ``len`` can be compared)."""

    def __init__(self, length: int) -> None:
        self.length = length

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.length))

    def __len__(self) -> int:
        return self.length


class ShuffledStream(IterableDataset):
    """A stream that shuffles with its own ``generator`` and has no ``set_epoch``."""

    def __init__(self, length: int) -> None:
        self.length = length
        self.generator = torch.Generator().manual_seed(1234)

    def __iter__(self) -> Iterator[int]:
        return iter(torch.randperm(self.length, generator=self.generator).tolist())


@pytest.mark.parametrize(("split", "drop"), list(itertools.product((False, True), repeat=2)))
def test_iterable_dataset_shard_yields_the_reference_samples(split: bool, drop: bool) -> None:
    compared = 0
    for batch_size, length, (n, i) in itertools.product(BATCH_SIZES, LENGTHS, _ranks()):
        if split and batch_size % n:
            continue
        case = (batch_size, length, n, i)
        theirs = reference.IterableDatasetShard(Stream(length), batch_size, drop, n, i, split)
        ours = accel_data.IterableDatasetShard(Stream(length), batch_size, drop, n, i, split)
        our_samples = list(ours)
        assert our_samples == list(theirs), case
        if split:
            # migration-data.md "len of split iterable shards": len is what the shard yields.
            assert len(ours) == len(our_samples), case
        else:
            assert len(ours) == len(theirs), case
        compared += 1
    assert compared > 800


def test_iterable_dataset_shard_reseeds_a_dataset_generator_by_epoch() -> None:
    for epoch, (n, i) in itertools.product(range(3), _ranks()):
        theirs = reference.IterableDatasetShard(ShuffledStream(11), 2, False, n, i)
        ours = accel_data.IterableDatasetShard(ShuffledStream(11), 2, False, n, i)
        theirs.set_epoch(epoch)
        ours.set_epoch(epoch)
        assert list(ours) == list(theirs), (epoch, n, i)


# --------------------------------------------------------- SkipBatchSampler, seeded sampler
def test_skip_batch_sampler_skips_like_the_reference() -> None:
    for batch_size, length, drop in itertools.product((1, 2, 3), range(0, 12), (False, True)):
        total = len(_batch_sampler(length, batch_size, drop))
        for skip in range(0, total + 1):
            case = (batch_size, length, drop, skip)
            theirs = reference.SkipBatchSampler(_batch_sampler(length, batch_size, drop), skip)
            ours = accel_data.SkipBatchSampler(_batch_sampler(length, batch_size, drop), skip)
            assert (len(ours), ours.total_length) == (len(theirs), theirs.total_length), case
            assert list(ours) == list(theirs), case
            # migration-data.md "skips apply to one pass": the next pass is whole.
            assert list(ours) == list(_batch_sampler(length, batch_size, drop)), case


def test_seedable_random_sampler_draws_the_reference_orders() -> None:
    for length, seed in itertools.product((1, 7, 20), (0, 42)):
        theirs = reference.SeedableRandomSampler(range(length), data_seed=seed)
        ours = accel_data.SeedableRandomSampler(range(length), data_seed=seed)
        for _ in range(3):  # each pass moves both to the next epoch
            assert list(ours) == list(theirs), (length, seed)
        theirs.set_epoch(7)
        ours.set_epoch(7)
        assert list(ours) == list(theirs), (length, seed)


# ------------------------------------------------------------------ prepared map-style loaders
def _walk(loader: Any) -> tuple[list[Any], list[tuple[bool, int]]]:
    batches, flags = [], []
    for batch in loader:
        batches.append(batch.tolist())
        flags.append((loader.end_of_dataloader, loader.remainder))
    return batches, flags


def _prepare_both(dataloader_args: dict[str, Any], **kwargs: Any) -> tuple[Any, Any]:
    def build() -> DataLoader:
        args = dict(dataloader_args)
        if args.pop("shuffle", False):
            args["sampler"] = RandomSampler(args["dataset"])
        return DataLoader(**args)

    return (
        reference.prepare_data_loader(build(), **kwargs),
        accel_data.prepare_data_loader(build(), **kwargs),
    )


@pytest.mark.parametrize(("split", "even", "drop"), FLAGS)
def test_prepared_loaders_match_the_reference(split: bool, even: bool, drop: bool) -> None:
    for batch_size, length, (n, i) in itertools.product((2, 4), (0, 5, 8, 13), _ranks()):
        if split and batch_size % n:
            continue
        case = (batch_size, length, n, i)
        data = {"dataset": list(range(length)), "batch_size": batch_size, "drop_last": drop}
        theirs, ours = _prepare_both(
            data, num_processes=n, process_index=i, split_batches=split, even_batches=even
        )
        assert isinstance(ours, accel_data.DataLoaderShard), case
        assert ours.total_batch_size == theirs.total_batch_size, case
        assert ours.total_dataset_length == theirs.total_dataset_length, case
        # migration-data.md "batch_size and drop_last of prepared loaders": the process's own
        # batch size and the original drop_last (the reference reports None and False).
        assert (ours.batch_size, ours.drop_last) == (batch_size // n if split else batch_size, drop)
        assert (theirs.batch_size, theirs.drop_last) == (None, False), case
        their_walk, our_walk = _walk(theirs), _walk(ours)
        assert our_walk == their_walk, case
        if not (split and not even and not drop and n > 1):  # see the sampler test
            assert len(ours) == len(theirs), case
        assert ours.iteration == theirs.iteration, case
        assert ours.end_of_dataloader == theirs.end_of_dataloader, case


def test_prepared_shuffled_loaders_with_a_seed_match_the_reference() -> None:
    for n, i in _ranks():
        data = {"dataset": list(range(23)), "batch_size": 3, "shuffle": True}
        theirs, ours = _prepare_both(
            data, num_processes=n, process_index=i, use_seedable_sampler=True, data_seed=7
        )
        for epoch in range(3):
            assert _walk(ours) == _walk(theirs), (n, i, epoch)
        theirs.set_epoch(5)
        ours.set_epoch(5)
        assert _walk(ours) == _walk(theirs), (n, i)
        assert ours.iteration == theirs.iteration == 6


@pytest.mark.parametrize("split", [False, True])
def test_prepared_iterable_loaders_match_the_reference(split: bool) -> None:
    for batch_size, length, drop, (n, i) in itertools.product(
        (2, 4), (0, 5, 8, 13), (False, True), _ranks()
    ):
        if split and batch_size % n:
            continue
        case = (batch_size, length, drop, n, i)
        data = {"dataset": Stream(length), "batch_size": batch_size, "drop_last": drop}
        theirs, ours = _prepare_both(data, num_processes=n, process_index=i, split_batches=split)
        assert [b.tolist() for b in ours] == [b.tolist() for b in theirs], case
        # migration-data.md "sizes of sharded iterable loaders": the sizes over all processes.
        assert ours.total_batch_size == (batch_size if split else batch_size * n), case
        assert ours.total_dataset_length == length, case


def test_skip_first_batches_of_a_prepared_loader_matches_the_reference() -> None:
    for length, skip, (n, i) in itertools.product((7, 12), (0, 1, 2, 5), _ranks()):
        data = {"dataset": list(range(length)), "batch_size": 2}
        theirs, ours = _prepare_both(data, num_processes=n, process_index=i)
        their_skip = reference.skip_first_batches(theirs, skip)
        our_skip = accel_data.skip_first_batches(ours, skip)
        assert isinstance(our_skip, accel_data.DataLoaderShard)
        (our_batches, our_flags), (their_batches, their_flags) = _walk(our_skip), _walk(their_skip)
        assert our_batches == their_batches, (length, skip, n, i)
        assert [end for end, _ in our_flags] == [end for end, _ in their_flags]
        # migration-data.md "skip_first_batches keeps the loader's settings": the remainder
        # stays known (the reference's loses its batch size, so its remainder is -1).
        assert {r for _, r in our_flags} <= {length % (2 * n)}
        assert our_skip.total_batch_size == 2 * n


def test_skip_first_batches_of_a_plain_loader_matches_the_reference() -> None:
    for length, skip, drop in itertools.product((7, 12), (0, 1, 3), (False, True)):
        data = {"dataset": list(range(length)), "batch_size": 3, "drop_last": drop}
        theirs = reference.skip_first_batches(DataLoader(**data), skip)
        ours = accel_data.skip_first_batches(DataLoader(**data), skip)
        assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]
        # migration-data.md "skip_first_batches keeps the loader's settings".
        assert (ours.batch_size, ours.drop_last) == (3, drop)
    stream = {"dataset": Stream(9), "batch_size": 2}
    theirs = reference.skip_first_batches(DataLoader(**stream), 2)
    ours = accel_data.skip_first_batches(DataLoader(**stream), 2)
    assert isinstance(ours, accel_data.SkipDataLoader)
    assert [b.tolist() for b in ours] == [b.tolist() for b in theirs]


def test_signatures_match_the_reference() -> None:
    import inspect

    for name in (
        "DataLoaderShard",
        "DataLoaderDispatcher",
        "BatchSamplerShard",
        "IterableDatasetShard",
        "SkipBatchSampler",
        "SkipDataLoader",
        "prepare_data_loader",
        "skip_first_batches",
    ):
        theirs = inspect.signature(getattr(reference, name)).parameters
        ours = inspect.signature(getattr(accel_data, name)).parameters
        positional = [p for p in theirs.values() if p.kind is not p.VAR_KEYWORD]
        assert list(ours)[: len(positional)] == [p.name for p in positional], name
        for parameter in positional:
            assert ours[parameter.name].default == parameter.default, (name, parameter.name)
        # accel's extra parameters come after the reference's and have defaults.
        extras = [ours[p] for p in list(ours)[len(positional) :]]
        assert all(
            p.kind in (p.VAR_KEYWORD, p.KEYWORD_ONLY) or p.default is not p.empty for p in extras
        ), name


# ------------------------------------------------------------------- split_between_processes
@pytest.mark.multiprocess
@pytest.mark.parametrize("num_processes", [2, 3])
def test_split_between_processes_matches_the_reference(num_processes: int) -> None:
    result = run_distributed(SCRIPTS / "split_parity.py", num_processes=num_processes, timeout=240)
    assert "DIFF" not in result.stdout, result.stdout
    summaries = re.findall(r"rank (\d): (\d+) split cases compared, (\d+) checked", result.stdout)
    assert {rank for rank, _, _ in summaries} == {str(r) for r in range(num_processes)}
    assert all(int(compared) > 70 for _, compared, _ in summaries), summaries
    assert result.stdout.count("input dict kept: True") == num_processes, result.stdout


@pytest.mark.multiprocess
@pytest.mark.timeout(450)  # about 230 cases through both libraries on a loaded machine
def test_dispatched_loaders_match_the_reference_on_two_processes() -> None:
    result = run_distributed(SCRIPTS / "dispatch_parity.py", num_processes=2, timeout=400)
    assert "DIFF" not in result.stdout, result.stdout
    summaries = re.findall(r"rank (\d): (\d+) dispatch cases compared", result.stdout)
    assert sorted(rank for rank, _ in summaries) == ["0", "1"], result.stdout
    assert all(int(count) > 200 for _, count in summaries), summaries


# ------------------------------------------------------------------------ gather_for_metrics
@pytest.mark.multiprocess
@pytest.mark.parametrize("num_processes", [1, 2])
def test_gather_for_metrics_of_the_last_step_matches_the_reference(num_processes: int) -> None:
    # 66 samples in batches of 8: the last step holds 2; transformers' Trainer gathers each
    # batch's loss repeated to the batch size and relies on the cut to the real samples.
    result = run_distributed(SCRIPTS / "gather_parity.py", num_processes=num_processes, timeout=240)
    assert "DIFF" not in result.stdout, result.stdout
    summaries = re.findall(r"rank (\d): (\d+) gather cases compared", result.stdout)
    assert sorted(rank for rank, _ in summaries) == [str(r) for r in range(num_processes)]
    assert all(int(count) == 3 for _, count in summaries), summaries

"""Prepared loaders in one process: settings, end-of-data bookkeeping, epochs, resume, skip."""

from __future__ import annotations

import pytest
import torch
from accel_state import GradientState
from torch.utils.data import DataLoader, IterableDataset

from accel_data import (
    DataLoaderDispatcher,
    DataLoaderShard,
    SkipBatchSampler,
    SkipDataLoader,
    gather_for_metrics,
    prepare_data_loader,
    skip_first_batches,
)


class Stream(IterableDataset):
    def __init__(self, n: int) -> None:
        self.n = n

    def __iter__(self):
        return iter(range(self.n))


def _collate(samples: list[int]) -> dict[str, torch.Tensor]:
    return {"x": torch.tensor(samples) * 10}


def test_prepared_loader_keeps_every_setting() -> None:
    loader = DataLoader(
        list(range(10)), batch_size=3, drop_last=True, collate_fn=_collate, pin_memory=False
    )
    prepared = prepare_data_loader(loader, num_processes=1, process_index=0)
    assert isinstance(prepared, DataLoaderShard)
    assert prepared.drop_last is True and prepared.batch_size == 3
    assert prepared.collate_fn is _collate
    assert [b["x"].tolist() for b in prepared] == [[0, 10, 20], [30, 40, 50], [60, 70, 80]]
    assert len(prepared) == 3 and prepared.total_batch_size == 3
    assert prepared.total_dataset_length == 10


def test_two_process_shard_reports_per_process_sizes() -> None:
    loader = DataLoader(list(range(10)), batch_size=4)
    prepared = prepare_data_loader(loader, num_processes=2, process_index=1, split_batches=True)
    assert prepared.batch_size == 2 and prepared.total_batch_size == 4
    assert [b.tolist() for b in prepared] == [[2, 3], [6, 7], [0, 1]]
    assert prepared.remainder == 2


def test_end_of_dataloader_is_known_while_the_last_batch_is_used() -> None:
    prepared = prepare_data_loader(DataLoader(list(range(7)), batch_size=3))
    state = GradientState()
    flags = []
    for _ in prepared:
        assert state.active_dataloader is prepared
        flags.append((state.end_of_dataloader, state.remainder))
    # remainder: samples of the last, incomplete step, known from the start of the pass.
    assert flags == [(False, 1), (False, 1), (True, 1)]
    assert not state.in_dataloader


def test_breaking_out_of_a_loop_unregisters_the_loader() -> None:
    prepared = prepare_data_loader(DataLoader(list(range(7)), batch_size=3))
    for _ in prepared:
        break
    assert not GradientState().in_dataloader


def test_gather_for_metrics_in_one_process_returns_everything() -> None:
    prepared = prepare_data_loader(DataLoader(list(range(9)), batch_size=5))
    seen = []
    for batch in prepared:
        seen += gather_for_metrics(batch).tolist()
    assert seen == list(range(9))
    assert gather_for_metrics(["a", "b"], use_gather_object=True) == ["a", "b"]


def test_put_on_device_moves_batches() -> None:
    prepared = prepare_data_loader(
        DataLoader(list(range(4)), batch_size=2),
        device="meta",
        put_on_device=True,
        non_blocking=True,
    )
    assert all(b.device.type == "meta" for b in prepared)


class EpochAware(torch.utils.data.Dataset):
    def __init__(self) -> None:
        self.epochs: list[int] = []

    def __len__(self) -> int:
        return 4

    def __getitem__(self, i: int) -> int:
        return i

    def set_epoch(self, epoch: int) -> None:
        self.epochs.append(epoch)


def test_epochs_advance_and_set_epoch_is_forwarded() -> None:
    dataset = EpochAware()
    prepared = prepare_data_loader(DataLoader(dataset, batch_size=2))
    list(prepared)
    list(prepared)
    prepared.set_epoch(7)
    assert prepared.iteration == 7
    list(prepared)
    assert dataset.epochs[-1] == 7 and prepared.iteration == 8
    assert dataset.epochs[:2] == [0, 1]


@pytest.mark.parametrize("seedable", [False, True])
def test_resume_mid_epoch_replays_the_exact_order(seedable: bool) -> None:
    def make(seed: int) -> DataLoaderShard:
        torch.manual_seed(seed)
        loader = DataLoader(list(range(17)), batch_size=3, shuffle=True)
        return prepare_data_loader(loader, use_seedable_sampler=seedable)

    reference = make(0)
    epochs = [[b.tolist() for b in reference] for _ in range(3)]
    assert epochs[0] != epochs[1]
    for k in range(len(epochs[0]) + 1):
        first = make(0)
        it = iter(first)
        for _ in range(k):
            next(it)
        saved = first.state_dict()
        assert saved["batches_yielded"] == k and saved["epoch"] == 0
        it.close()
        resumed = make(12345)
        resumed.load_state_dict(saved)
        # Saved again before a batch is drawn (a second checkpoint): the loaded position.
        again = resumed.state_dict()
        assert again["batches_yielded"] == k and again["epoch"] == 0
        relay = make(999)
        relay.load_state_dict(again)
        assert [b.tolist() for b in relay] == epochs[0][k:]
        resumed.load_state_dict(saved)
        assert len(resumed) == len(epochs[0]) - k
        assert [b.tolist() for b in resumed] == epochs[0][k:]
        assert [b.tolist() for b in resumed] == epochs[1]
        assert [b.tolist() for b in resumed] == epochs[2]


def test_state_after_a_full_epoch_starts_the_next_one() -> None:
    prepared = prepare_data_loader(DataLoader(list(range(5)), batch_size=2, shuffle=True))
    list(prepared)
    saved = prepared.state_dict()
    assert saved["epoch"] == 1 and saved["batches_yielded"] == 0
    following = [b.tolist() for b in prepared]
    resumed = prepare_data_loader(DataLoader(list(range(5)), batch_size=2, shuffle=True))
    resumed.load_state_dict(saved)
    assert [b.tolist() for b in resumed] == following


def test_load_state_dict_refuses_another_total_batch_size() -> None:
    saved = prepare_data_loader(DataLoader(list(range(8)), batch_size=2)).state_dict()
    other = prepare_data_loader(DataLoader(list(range(8)), batch_size=4))
    with pytest.raises(ValueError, match="same total batch size; saved 2.*has 4"):
        other.load_state_dict(saved)
    with pytest.raises(KeyError, match="batches_yielded"):
        other.load_state_dict({"epoch": 0})


def test_skip_first_batches_of_a_plain_loader_keeps_its_settings() -> None:
    loader = DataLoader(list(range(10)), batch_size=3, drop_last=True, collate_fn=_collate)
    skipped = skip_first_batches(loader, 1)
    assert isinstance(skipped.batch_sampler, SkipBatchSampler)
    assert skipped.drop_last is True and skipped.batch_size == 3
    assert skipped.collate_fn is _collate
    assert len(skipped) == 2
    assert [b["x"].tolist() for b in skipped] == [[30, 40, 50], [60, 70, 80]]
    # the skip applies to one pass only
    assert len(skipped) == 3
    assert [b["x"].tolist() for b in skipped][0] == [0, 10, 20]


def test_skip_first_batches_of_a_stream() -> None:
    skipped = skip_first_batches(DataLoader(Stream(7), batch_size=2, drop_last=True), 2)
    assert isinstance(skipped, SkipDataLoader) and skipped.drop_last is True
    assert [b.tolist() for b in skipped] == [[4, 5]]
    assert [b.tolist() for b in skipped] == [[0, 1], [2, 3], [4, 5]]


def test_skip_first_batches_of_a_prepared_loader_moves_its_epoch_on() -> None:
    prepared = prepare_data_loader(
        DataLoader(list(range(12)), batch_size=2, shuffle=True), use_seedable_sampler=True
    )
    epochs = [[b.tolist() for b in prepared] for _ in range(2)]
    prepared.set_epoch(0)
    skipped = skip_first_batches(prepared, 4)
    assert isinstance(skipped, DataLoaderShard) and len(skipped) == 2
    inside = []
    for batch in skipped:
        inside.append(prepared.state_dict()["batches_yielded"])
        assert batch.tolist() in epochs[0][4:]
    assert inside == [5, 6]
    assert [b.tolist() for b in prepared] == epochs[1]


def test_skip_first_batches_refuses_a_negative_count() -> None:
    with pytest.raises(ValueError, match="int >= 0; got -1"):
        skip_first_batches(DataLoader(list(range(3))), -1)


def test_dispatching_without_a_process_group_says_how_to_fix_it() -> None:
    prepared = prepare_data_loader(
        DataLoader(Stream(4), batch_size=2),
        device="cpu",
        num_processes=2,
        process_index=0,
        put_on_device=True,
    )
    assert isinstance(prepared, DataLoaderDispatcher)
    with pytest.raises(RuntimeError, match="dispatch_batches=False"):
        list(prepared)


def test_prepare_refuses_split_batches_that_do_not_divide() -> None:
    with pytest.raises(ValueError, match="batch_size=3, num_processes=2"):
        prepare_data_loader(
            DataLoader(list(range(6)), batch_size=3),
            num_processes=2,
            process_index=0,
            split_batches=True,
        )


def test_prepare_refuses_what_is_not_a_dataloader() -> None:
    with pytest.raises(TypeError, match="needs a torch.utils.data.DataLoader; got list"):
        prepare_data_loader([1, 2, 3])  # type: ignore[arg-type]


def test_shuffle_follows_the_callers_generator_after_prepare() -> None:
    """Reseeding the DataLoader's generator after ``prepare`` sets the next pass's order.

    The two shards of a batch-8 loader, read step by step, give the batches of a plain batch-16
    loader whose generator has the same seed (the reference's 2-process training check).
    """
    generator = torch.Generator()
    baseline_loader = DataLoader(list(range(64)), batch_size=16, shuffle=True, generator=generator)
    generator.manual_seed(42)
    baseline = [[b.tolist() for b in baseline_loader] for _ in range(2)]
    shards = []
    for rank in range(2):
        generator.manual_seed(7)
        loader = DataLoader(list(range(64)), batch_size=8, shuffle=True, generator=generator)
        prepared = prepare_data_loader(loader, num_processes=2, process_index=rank)
        generator.manual_seed(42)
        shards.append([[b.tolist() for b in prepared] for _ in range(2)])
    for epoch in range(2):
        steps = [a + b for a, b in zip(shards[0][epoch], shards[1][epoch], strict=True)]
        assert steps == baseline[epoch]


class Unsized(IterableDataset):
    def __iter__(self):
        return iter(range(66))


@pytest.mark.parametrize("dataset", [Unsized(), list(range(66))], ids=["stream", "map"])
def test_gather_for_metrics_cuts_a_repeated_batch_value_to_the_real_samples(dataset) -> None:
    # transformers' Trainer gathers each batch's loss repeated to the batch size (8); the last
    # batch holds 2 samples, so 2 of its 8 rows are kept and the mean is the exact one.
    prepared = prepare_data_loader(DataLoader(dataset, batch_size=8), put_on_device=True)
    rows = [gather_for_metrics(b.float().mean().repeat(8)) for b in prepared]
    assert [len(r) for r in rows] == [8] * 8 + [2]
    assert torch.cat(rows).mean().item() == pytest.approx(32.5)

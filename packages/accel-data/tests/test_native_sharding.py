"""prepare_data_loader and a ``datasets.IterableDataset`` with at least as many shards as
processes: each process reads only its own shards (``IterableDataset.shard``), instead of
every process reading the whole stream and keeping its part (``IterableDatasetShard``)."""

from __future__ import annotations

import pytest
from torch.utils.data import DataLoader

from accel_data import IterableDatasetShard, prepare_data_loader

datasets = pytest.importorskip("datasets", reason="datasets is not installed")


def _stream(rows: int, shards: int):
    return datasets.Dataset.from_dict({"x": list(range(rows))}).to_iterable_dataset(
        num_shards=shards
    )


def _values(loader) -> list[int]:
    return [int(v) for batch in loader for v in batch["x"]]


def test_each_process_reads_only_its_own_shards():
    stream = _stream(10, 2)
    read = []
    for index in range(2):
        loader = prepare_data_loader(
            DataLoader(stream, batch_size=4),
            num_processes=2,
            process_index=index,
            dispatch_batches=False,
        )
        assert isinstance(loader.dataset, datasets.IterableDataset)
        assert not isinstance(loader.dataset, IterableDatasetShard)
        assert loader.dataset.n_shards == 1
        read.append(_values(loader))
    assert read == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert [len(batch["x"]) for batch in loader] == [4, 1]  # the loader's batch size is kept


def test_more_shards_than_processes_are_divided_between_them():
    stream = _stream(12, 4)
    read = [
        _values(
            prepare_data_loader(
                DataLoader(stream, batch_size=2),
                num_processes=2,
                process_index=index,
                dispatch_batches=False,
            )
        )
        for index in range(2)
    ]
    assert sorted(read[0] + read[1]) == list(range(12))
    assert not set(read[0]) & set(read[1])


@pytest.mark.parametrize(
    ("shards", "split_batches"), [(1, False), (2, True)], ids=["fewer-shards", "split-batches"]
)
def test_otherwise_every_process_keeps_its_part_of_the_stream(shards, split_batches):
    loader = prepare_data_loader(
        DataLoader(_stream(8, shards), batch_size=4),
        num_processes=2,
        process_index=1,
        dispatch_batches=False,
        split_batches=split_batches,
    )
    assert isinstance(loader.dataset, IterableDatasetShard)

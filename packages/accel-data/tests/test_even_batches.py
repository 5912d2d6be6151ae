"""override_even_batches: the value holds inside the block only, and the loader obeys it."""

from __future__ import annotations

import pytest
import torch
from torch.utils.data import DataLoader, TensorDataset

from accel_data import override_even_batches, prepare_data_loader


def test_even_batches_overridden_for_the_block_only() -> None:
    data = TensorDataset(torch.arange(5))
    # Process 1 of 2 gets 2 of the 5 samples; with even_batches it loops back to a third.
    loader = prepare_data_loader(DataLoader(data, batch_size=1), num_processes=2, process_index=1)
    untouched = DataLoader(data, batch_size=1)
    assert len(list(loader)) == 3
    with override_even_batches([loader, untouched], even_batches=False):
        assert loader.batch_sampler.even_batches is False
        assert len(list(loader)) == 2
    assert loader.batch_sampler.even_batches is True
    with pytest.raises(RuntimeError), override_even_batches([loader], even_batches=False):
        raise RuntimeError("the block failed")
    assert loader.batch_sampler.even_batches is True
    with override_even_batches([loader], even_batches=None):
        assert loader.batch_sampler.even_batches is True


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(torch.arange(3))


def test_overriding_iterable_loaders_warns_and_leaves_them() -> None:
    mapped = prepare_data_loader(
        DataLoader(TensorDataset(torch.arange(5)), batch_size=1), num_processes=2, process_index=1
    )
    stream = DataLoader(_Stream(), batch_size=1)
    with pytest.warns(UserWarning, match="only supported for map-style datasets, yet 1 of"):
        with override_even_batches([mapped, stream], even_batches=False):
            assert mapped.batch_sampler.even_batches is False
    assert mapped.batch_sampler.even_batches is True


def test_a_batch_sampler_given_as_the_sampler_is_sharded_by_batch() -> None:
    from torch.utils.data import BatchSampler, SequentialSampler
    from torch.utils.data.dataloader import default_collate

    data = TensorDataset(torch.arange(8))
    seen = []
    for rank in (0, 1):
        sampler = BatchSampler(SequentialSampler(data), batch_size=2, drop_last=False)
        plain = DataLoader(data, sampler=sampler, batch_size=None, collate_fn=default_collate)
        loader = prepare_data_loader(plain, num_processes=2, process_index=rank)
        seen.append([batch[0].tolist() for batch in loader])
    assert seen == [[[0, 1], [4, 5]], [[2, 3], [6, 7]]]

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

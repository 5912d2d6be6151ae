"""Packing CPU-offloaded weights into page-locked blocks (the packing itself runs anywhere)."""

from __future__ import annotations

import pytest
import torch

from accel_bigmodel import dispatch_model, pin_offloaded_weights
from accel_bigmodel.hooks._pinned_offload import PIN_BLOCK_BYTES, pack


def test_pack_copies_every_tensor_bit_for_bit_into_few_blocks():
    g = torch.Generator().manual_seed(0)
    tensors = [
        torch.randn(3, 5, generator=g),
        torch.randn(64, generator=g).to(torch.bfloat16),
        torch.randint(0, 9, (7,), generator=g),
        torch.empty(0, 4),
    ]
    copies, total = pack(tensors, pin=False)
    assert total == PIN_BLOCK_BYTES  # all of them share one block
    for old, new in zip(tensors, copies):
        assert new.dtype == old.dtype and new.shape == old.shape
        assert torch.equal(new, old)
        assert new.data_ptr() != old.data_ptr() or old.numel() == 0
    addresses = sorted(c.data_ptr() for c in copies if c.numel())
    assert all(a % 512 == 0 for a in (x - addresses[0] for x in addresses))
    assert addresses[-1] - addresses[0] < PIN_BLOCK_BYTES


def test_pack_gives_a_tensor_larger_than_a_block_the_next_power_of_two(monkeypatch):
    import accel_bigmodel.hooks._pinned_offload as pinned

    monkeypatch.setattr(pinned, "PIN_BLOCK_BYTES", 4096)
    big = torch.arange(1500, dtype=torch.float32)  # 6000 bytes: a block of 8192
    small = torch.arange(300, dtype=torch.float32)  # 1200 bytes: fits in the big one's tail
    other = torch.arange(1000, dtype=torch.float32)  # 4000 bytes: no room left, a new block
    copies, total = pinned.pack([small, big, other], pin=False)
    assert total == 8192 + 4096
    assert all(torch.equal(a, b) for a, b in zip([small, big, other], copies))


def test_pinning_without_a_cuda_device_is_refused_by_name():
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is here")
    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.Linear(4, 4))
    model = dispatch_model(model, {"0": "cpu", "1": "cpu"})
    with pytest.raises(RuntimeError, match="no CUDA device is available"):
        pin_offloaded_weights(model)

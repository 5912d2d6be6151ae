"""A model split across the GPU, the CPU and the disk gives the in-memory model's outputs.

``load_checkpoint_and_dispatch`` places the blocks by a map across ``cuda:0``, ``cpu`` and
``disk``; the modules mapped to the CPU and the disk are offloaded (their weights come to the
GPU for their forward), read ahead by the prefetcher into page-locked buffers and copied on a
side stream. The same weights on the same device run the same kernels, so the outputs must be
bit-identical to the in-memory model's, with the prefetcher on and off. On the CPU the map
holds ``cpu`` and ``disk`` only.
"""

from __future__ import annotations

import pytest
import torch
from _gpu_models import DEVICES, TinyStack
from accel.big_modeling import init_empty_weights, load_checkpoint_and_dispatch
from accel_bigmodel import attach_prefetcher
from safetensors.torch import save_file

WIDTH, DEPTH = 128, 6


def _map(device: str) -> dict[str, object]:
    main: object = 0 if device == "cuda" else "cpu"
    placement: dict[str, object] = {"embed": main, "blocks.0": main, "head": main}
    placement.update({f"blocks.{i}": "cpu" for i in (1, 2)})
    placement.update({f"blocks.{i}": "disk" for i in range(3, DEPTH)})
    return placement


@pytest.fixture
def reference(tmp_path):
    torch.manual_seed(0)
    model = TinyStack(width=WIDTH, depth=DEPTH).eval()
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    save_file(
        {k: v.contiguous() for k, v in model.state_dict().items()}, folder / "model.safetensors"
    )
    return model, folder


def _dispatched(folder, tmp_path, device):
    with init_empty_weights():
        empty = TinyStack(width=WIDTH, depth=DEPTH)
    return load_checkpoint_and_dispatch(
        empty, folder, device_map=_map(device), offload_folder=tmp_path / "offload"
    ).eval()


@pytest.mark.parametrize("device", DEVICES)
@torch.no_grad()
def test_outputs_equal_the_in_memory_model(reference, tmp_path, device):
    model, folder = reference
    ids = torch.randint(0, 64, (4, 32), generator=torch.Generator().manual_seed(1)).to(device)
    expected = model.to(device)(ids)
    dispatched = _dispatched(folder, tmp_path, device)
    assert dispatched.blocks[0].up.weight.device.type == device
    for _ in range(3):
        out = dispatched(ids)
        assert out.device.type == device
        assert torch.equal(out, expected), (out - expected).abs().max()


@pytest.mark.parametrize("device", DEVICES)
@torch.no_grad()
def test_prefetcher_on_and_off_give_identical_outputs(reference, tmp_path, device):
    _, folder = reference
    ids = torch.randint(0, 64, (4, 32), generator=torch.Generator().manual_seed(2)).to(device)
    dispatched = _dispatched(folder, tmp_path, device)
    prefetcher = dispatched._accel_prefetcher
    assert prefetcher is not None
    if device == "cuda":
        assert prefetcher.pool.pin and prefetcher.read_into_buffers
    with_prefetch = [dispatched(ids) for _ in range(3)]
    assert prefetcher.hits > 0, (prefetcher.hits, prefetcher.misses)
    if device == "cuda":
        assert prefetcher.streams, "no side stream was used for the copies"
        assert prefetcher.pool.peak <= prefetcher.pool.capacity
    assert attach_prefetcher(dispatched, layers_ahead=0) is None
    without = [dispatched(ids) for _ in range(3)]
    for a, b in zip(with_prefetch, without):
        assert torch.equal(a, b), (a - b).abs().max()


@pytest.mark.parametrize("device", DEVICES)
@torch.no_grad()
def test_loaded_weights_equal_the_stored_ones_bit_for_bit(tmp_path, device):
    """Weights bound for CUDA go through page-locked staging buffers in 16 MiB chunks, several
    threads at once; a tensor bigger than one chunk and odd-sized ones must land intact."""
    torch.manual_seed(0)
    stored = {
        "big.weight": torch.randn(4100, 1100).to(torch.bfloat16),  # 9.0 MB: several chunks
        "huge.weight": torch.randn(9000, 1000),  # 36 MB in float32
        "odd.weight": torch.randn(3, 7),
        "odd.bias": torch.randn(3),
    }
    save_file(stored, tmp_path / "model.safetensors")

    def build() -> torch.nn.Module:
        model = torch.nn.Module()
        model.big = torch.nn.Linear(1100, 4100, bias=False, dtype=torch.bfloat16)
        model.huge = torch.nn.Linear(1000, 9000, bias=False)
        model.odd = torch.nn.Linear(7, 3)
        return model

    with init_empty_weights():
        empty = build()
    main = 0 if device == "cuda" else "cpu"
    model = load_checkpoint_and_dispatch(
        empty, tmp_path / "model.safetensors", device_map={"": main}
    )
    for name, value in stored.items():
        loaded = model.get_parameter(name)
        assert loaded.device.type == device and loaded.dtype == value.dtype
        assert torch.equal(loaded.cpu(), value), name


@pytest.mark.cuda
@torch.no_grad()
def test_pinned_cpu_offload_gives_identical_outputs(reference, tmp_path):
    """`pin_offloaded_weights` moves the CPU-offloaded weights into page-locked blocks; the
    prefetcher then copies them to the GPU straight from there, with the same outputs."""
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device")
    from accel_bigmodel import pin_offloaded_weights

    model, folder = reference
    ids = torch.randint(0, 64, (4, 32), generator=torch.Generator().manual_seed(3)).to("cuda")
    expected = model.to("cuda")(ids)
    dispatched = _dispatched(folder, tmp_path, "cuda")
    before = dispatched(ids)
    done = pin_offloaded_weights(dispatched)
    on_cpu = [p for i in (1, 2) for p in model.blocks[i].parameters()]
    assert done.tensors == len(on_cpu)
    assert done.weight_bytes == sum(p.numel() * p.element_size() for p in on_cpu)
    assert done.pinned_bytes >= done.weight_bytes
    prefetcher = dispatched._accel_prefetcher
    assert len(prefetcher.direct) == 2, "the two CPU blocks are copied straight from pinned memory"
    for _ in range(3):
        out = dispatched(ids)
        assert torch.equal(out, expected) and torch.equal(out, before)
    assert prefetcher.hits > 0
    assert prefetcher.pool.peak <= prefetcher.pool.capacity
    assert pin_offloaded_weights(dispatched).tensors == 0  # already pinned: nothing more to do

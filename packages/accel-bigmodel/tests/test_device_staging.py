"""Chunked, multi-threaded reads: staging buffers towards a device, and the prefetcher's fill."""

from concurrent.futures import ThreadPoolExecutor

import pytest
import torch
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import init_empty_weights, load_checkpoint_and_dispatch, write_safetensors
from accel_bigmodel.files._safetensors_io import SafetensorsFile
from accel_bigmodel.offload._device_staging import DeviceStaging
from accel_bigmodel.offload._offload_layouts import SafetensorsStorage
from accel_bigmodel.offload._prefetch_pool import READ_CHUNK_BYTES, TensorSpan, fill


@pytest.fixture
def stored(tmp_path):
    g = torch.Generator().manual_seed(0)
    tensors = {
        "big": torch.randn(1000, 257, generator=g).to(torch.bfloat16),
        "odd": torch.randn(33, generator=g),
        "ints": torch.arange(7, dtype=torch.int64),
        "empty": torch.zeros(0, 4),
    }
    path = tmp_path / "w.safetensors"
    write_safetensors(str(path), tensors)
    return SafetensorsFile(str(path)), tensors


@pytest.mark.parametrize("chunk", [1, 100, 4096, 1 << 20])
def test_staged_reads_give_every_byte_in_place(stored, chunk):
    file, tensors = stored
    staging = DeviceStaging(chunk_bytes=chunk, pin=False)
    storage = SafetensorsStorage()

    def read(name):
        return staging.read_to(storage, storage.tensor(file, name), torch.device("cpu"))

    # Several threads share one staging object, each with buffers of its own.
    with ThreadPoolExecutor(max_workers=3) as pool:
        names = list(tensors) * 3
        got = list(pool.map(read, names))
    storage.close()
    for name, value in zip(names, got):
        assert value.dtype == tensors[name].dtype and value.shape == tensors[name].shape
        assert torch.equal(value, tensors[name]), name


def test_staging_refuses_an_empty_chunk():
    with pytest.raises(ValueError, match="chunk_bytes must be >= 1; got 0"):
        DeviceStaging(chunk_bytes=0, pin=False)


def _plan(file: SafetensorsFile, storage: SafetensorsStorage) -> list[TensorSpan]:
    return [TensorSpan(name, storage, storage.tensor(file, name)) for name in file.keys()]


def test_parallel_fill_reads_what_a_sequential_fill_reads(tmp_path):
    # One tensor spans several read chunks, so the threads share it.
    big = torch.randn(2 * READ_CHUNK_BYTES // 4 + 123)
    tensors = {"big": big, "small": torch.arange(5.0), "empty": torch.zeros(0)}
    path = tmp_path / "w.safetensors"
    write_safetensors(str(path), tensors)
    storage = SafetensorsStorage()
    plan = _plan(SafetensorsFile(str(path)), storage)
    size = sum(-(-span.nbytes // 64) * 64 for span in plan)
    with ThreadPoolExecutor(max_workers=4) as readers:
        parallel = fill(plan, torch.empty(size, dtype=torch.uint8), None, readers)
    sequential = fill(plan, torch.empty(size, dtype=torch.uint8), None, None)
    storage.close()
    for name, value in tensors.items():
        assert torch.equal(parallel[name], value) and torch.equal(sequential[name], value)


@torch.no_grad()
def test_prefetcher_reads_into_buffers_with_its_reader_threads(tmp_path):
    torch.manual_seed(0)
    tiny = TinyLM().eval()
    ids = torch.randint(0, 32, (2, 5))
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    placement = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}
    with init_empty_weights():
        empty = TinyLM()
    offload = tmp_path / "offload"
    model = load_checkpoint_and_dispatch(
        empty, folder, device_map=placement, offload_folder=offload
    )
    prefetcher = model._accel_prefetcher
    prefetcher.read_into_buffers = True  # the CUDA path: the pool's buffers, filled in parallel
    prefetcher.map_files = False  # no leased map: every file is read into those buffers
    expected = tiny(ids)
    for _ in range(3):
        torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    assert prefetcher.hits > 0
    assert any(t.name.startswith("accel-prefetch-read") for t in prefetcher.readers._threads)


@torch.no_grad()
def test_weights_held_in_memory_are_staged_through_the_pool(tmp_path):
    from accel_bigmodel import attach_prefetcher, cpu_offload
    from accel_bigmodel.offload._prefetch_pool import memory_plan

    torch.manual_seed(0)
    tiny = TinyLM().eval()
    ids = torch.randint(0, 32, (2, 5))
    expected = tiny(ids)
    model = cpu_offload(TinyLM().eval(), execution_device="cpu", state_dict=tiny.state_dict())
    prefetcher = attach_prefetcher(model, layers_ahead=4, pool_bytes=1 << 20)
    held = [memory_plan(h.weights_map, h.offloaded_names) for h in prefetcher.hooks]
    assert all(held), "cpu_offload keeps every weight in memory"
    prefetcher.stage_memory = True  # the CUDA path: copies into the pool's buffers
    staged = []
    original = prefetcher._stage
    prefetcher._stage = lambda *a: staged.append(a[0]) or original(*a)
    for _ in range(3):
        torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    assert len(staged) >= len(prefetcher.hooks) and prefetcher.pool.peak <= 1 << 20

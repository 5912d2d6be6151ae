"""The prefetcher reads offloaded weights ahead within its pool bound and changes no output."""

import pytest
import torch
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import (
    OffloadedWeightsLoader,
    Prefetcher,
    attach_prefetcher,
    dispatch_model,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    offload_state_dict,
)
from accel_bigmodel.offload._prefetch_pool import BufferPool, plan_bytes

DISK_MAP = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}


def _on_disk(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with init_empty_weights():
        model = TinyLM()
    return load_checkpoint_and_dispatch(
        model, folder, device_map=DISK_MAP, offload_folder=tmp_path / "offload"
    )


class LeaseCounter:
    """Counts the bytes a pool has lent out, independently of the pool's own bookkeeping."""

    def __init__(self, pool: BufferPool) -> None:
        self.out = 0
        self.peak = 0
        reserve, acquire, give_back = pool.reserve, pool.acquire, pool.give_back

        def counted_reserve(nbytes):
            granted = reserve(nbytes)
            self._add(nbytes if granted else 0)
            return granted

        def counted_acquire(nbytes):
            buffer = acquire(nbytes)
            self._add(0 if buffer is None else buffer.numel())
            return buffer

        def counted_give_back(lease):
            self._add(-(lease if isinstance(lease, int) else lease.numel()))
            give_back(lease)

        pool.reserve, pool.acquire, pool.give_back = (
            counted_reserve,
            counted_acquire,
            counted_give_back,
        )

    def _add(self, nbytes: int) -> None:
        self.out += nbytes
        self.peak = max(self.peak, self.out)


@torch.no_grad()
def test_prefetched_outputs_equal_the_unprefetched_ones(tiny, ids, tmp_path):
    model = _on_disk(tiny, tmp_path)
    prefetcher = model._accel_prefetcher
    assert isinstance(prefetcher, Prefetcher)
    with_prefetch = [model(ids) for _ in range(3)]
    # Every module of the first forward was read ahead: prefetching starts with the forward.
    assert prefetcher.misses == 0 and prefetcher.hits == 3 * len(prefetcher.hooks)
    assert attach_prefetcher(model, layers_ahead=0) is None
    assert model._accel_prefetcher is None
    without = model(ids)
    for output in with_prefetch:
        torch.testing.assert_close(output, without, rtol=0, atol=0)
    torch.testing.assert_close(without, tiny(ids))


@pytest.mark.parametrize(
    ("into_buffers", "map_files"),
    [(False, False), (True, False), (True, True)],
    ids=["new-memory", "pool-buffers", "leased-map"],
)
@torch.no_grad()
def test_pool_never_holds_more_than_its_bound(tiny, ids, tmp_path, into_buffers, map_files):
    model = _on_disk(tiny, tmp_path)
    plans = [p for p in model._accel_prefetcher.plans.values() if p]
    largest = max(plan_bytes(p) for p in plans)
    bound = 2 * largest + 64
    prefetcher = attach_prefetcher(model, layers_ahead=8, pool_bytes=bound)
    assert len(plans) == len(prefetcher.hooks)  # every disk module reads straight from its file
    prefetcher.read_into_buffers = into_buffers  # pool buffers are the CUDA path; test it here
    prefetcher.map_files = map_files  # the default on the CPU: the leased file's own pages
    counter = LeaseCounter(prefetcher.pool)
    expected = tiny(ids)
    for _ in range(3):
        torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    assert largest < counter.peak <= bound  # more than one module ahead, never past the bound
    assert prefetcher.pool.peak <= bound
    assert prefetcher.hits > 0


def test_buffers_are_reused_unless_still_in_use():
    pool = BufferPool(capacity=256)
    first = pool.acquire(128)
    assert pool.acquire(256) is None  # 128 + 256 > 256
    pool.give_back(first)
    again = pool.acquire(128)
    assert again is first
    kept = again[:16]  # a tensor outside the pool still uses this memory
    pool.give_back(again)
    assert pool.held == 0
    fresh = pool.acquire(128)
    assert fresh is not None and fresh is not again
    assert kept.numel() == 16


@torch.no_grad()
def test_dat_offload_files_are_read_ahead(tiny, ids, tmp_path):
    state = {k: v for k, v in tiny.state_dict().items() if k.startswith("blocks.")}
    offload_state_dict(tmp_path / "dat", state)
    with init_empty_weights():
        model = TinyLM()
    model.embed.weight = torch.nn.Parameter(tiny.embed.weight.detach().clone())
    model.head.weight = model.embed.weight
    model = dispatch_model(model, DISK_MAP, offload_dir=tmp_path / "dat")
    prefetcher = model._accel_prefetcher
    plans = [p for p in prefetcher.plans.values() if p]
    assert plans and all(span.stored.source.endswith(".dat") for p in plans for span in p)
    torch.testing.assert_close(model(ids), tiny(ids))
    torch.testing.assert_close(model(ids), tiny(ids))
    assert prefetcher.misses == 0


def test_a_cast_entry_is_not_read_raw(tmp_path):
    offload_state_dict(tmp_path, {"w": torch.ones(4)})
    loader = OffloadedWeightsLoader(save_folder=tmp_path)
    stored = loader.weight_span("w")[1]
    assert (stored.start, stored.nbytes, stored.dtype, stored.shape) == (0, 16, torch.float32, (4,))
    loader.state_dict["w"] = torch.zeros(4)
    assert loader.weight_span("w") is None  # held in memory: nothing to read


@pytest.mark.parametrize(
    ("kwargs", "word"),
    [
        ({"layers_ahead": -1}, "layers_ahead"),
        ({"layers_ahead": "2"}, "layers_ahead"),
        ({"pool_bytes": -5}, "pool_bytes"),
        ({"layers_ahead": True}, "layers_ahead"),
    ],
)
def test_bad_settings_are_refused(tiny, tmp_path, kwargs, word):
    model = _on_disk(tiny, tmp_path)
    with pytest.raises(ValueError, match=f"{word} must be an int >= 0; got"):
        attach_prefetcher(model, **kwargs)
    assert isinstance(model._accel_prefetcher, Prefetcher)  # the old one still works


@pytest.mark.cuda  # page-locked buffers need a CUDA device
@torch.no_grad()
def test_cuda_reads_go_through_pinned_buffers(tiny, ids, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with init_empty_weights():
        model = TinyLM()
    device_map = {"embed": 0, "blocks": "disk", "head": 0, "scale": 0}
    model = load_checkpoint_and_dispatch(
        model, folder, device_map=device_map, offload_folder=tmp_path / "offload"
    )
    prefetcher = model._accel_prefetcher
    assert prefetcher.pool.pin and prefetcher.read_into_buffers
    expected = tiny(ids)
    for _ in range(3):
        torch.testing.assert_close(model(ids.cuda()).cpu(), expected)
    assert prefetcher.hits > 0 and prefetcher.pool.peak <= prefetcher.pool.capacity


@torch.no_grad()
def test_removed_hooks_are_not_prefetched(tiny, ids, tmp_path):
    from accel_bigmodel import remove_hook_from_submodules

    model = _on_disk(tiny, tmp_path)
    prefetcher = model._accel_prefetcher
    model(ids)
    remove_hook_from_submodules(model)
    assert all(hook.prefetcher is None for hook in prefetcher.hooks)
    prefetcher.pending.clear()
    prefetcher.schedule_after(None)
    assert not prefetcher.pending


def _resident(path, start, nbytes):
    """Fraction of the pages of ``path[start:start + nbytes]`` in the page cache (mincore)."""
    import ctypes
    import mmap

    first = start // mmap.PAGESIZE * mmap.PAGESIZE
    length = start + nbytes - first
    pages = (length + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    mincore = ctypes.CDLL(None, use_errno=True).mincore
    mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
    with open(path, "rb") as handle:
        # A private mapping: writable for ctypes, still backed by the file's cached pages.
        view = mmap.mmap(handle.fileno(), length, offset=first, access=mmap.ACCESS_COPY)
    anchor = ctypes.c_char.from_buffer(view)
    flags = (ctypes.c_ubyte * pages)()
    assert mincore(ctypes.addressof(anchor), length, flags) == 0
    del anchor
    view.close()
    return sum(flag & 1 for flag in flags) / pages


@pytest.mark.skipif(not hasattr(__import__("os"), "posix_fadvise"), reason="needs posix_fadvise")
@torch.no_grad()
def test_modules_prepared_for_the_next_forward_are_prepared_again_when_it_starts(
    tiny, ids, tmp_path
):
    import os

    model = _on_disk(tiny, tmp_path)
    prefetcher = model._accel_prefetcher
    prefetcher.map_files = False
    prefetcher.read_into_buffers = False  # each module read into new memory when prepared
    expected = tiny(ids)
    torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    # The end of the forward prepared the first modules of the next one.
    first = prefetcher.hooks[0]
    before, lease = prefetcher.pending[id(first)]
    before.result(timeout=60)  # prepared on the background thread: it may still be running
    assert isinstance(lease, int)
    # While idle, the kernel reclaims the pages (here: evicted from the page cache).
    plan = prefetcher.plans[id(first)]
    for span in plan:
        fd = os.open(span.stored.source, os.O_RDONLY)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        os.close(fd)
    prefetcher.refresh()
    after, kept = prefetcher.pending[id(first)]
    assert after is not before and kept == lease  # prepared again, same share of the pool
    after.result(timeout=60)
    assert all(
        _resident(s.stored.source, s.stored.start, s.nbytes) == 1.0 for s in plan if s.nbytes
    )
    torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    assert prefetcher.misses == 0
    assert prefetcher.pool.held <= prefetcher.pool.capacity

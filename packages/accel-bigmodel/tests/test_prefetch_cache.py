"""A disk part larger than the page cache streams through it: the prefetcher keeps the modules
within ``cache_bytes`` cached and drops the pages of the ones after it once they ran."""

import ctypes
import gc
import mmap
import os
import sys

import pytest
import torch
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import attach_prefetcher, init_empty_weights, load_checkpoint_and_dispatch
from accel_bigmodel.files._file_guard import FileGuard
from accel_bigmodel.files._leased_map import SUPPORTED
from accel_bigmodel.hooks import _prefetch_attach
from accel_bigmodel.hooks._prefetch import Prefetcher
from accel_bigmodel.hooks._prefetch_attach import default_cache_bytes, mapped_weight_bytes
from accel_bigmodel.offload._prefetch_pool import plan_bytes

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not hasattr(os, "posix_fadvise"),
    reason="page cache residency (mincore) and posix_fadvise are read on Linux",
)
_PAGE = mmap.PAGESIZE
_LIBC = ctypes.CDLL(None, use_errno=True)
_LIBC.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_char_p]


def resident_pages(path: str, start: int, nbytes: int) -> tuple[int, int]:
    """(pages in the page cache, whole pages) of the file's bytes ``[start, start + nbytes)``."""
    first = -(-start // _PAGE)
    end = (start + nbytes) // _PAGE
    if end <= first:
        return 0, 0
    with open(path, "rb") as handle:
        mapped = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_COPY)
        anchor = ctypes.c_char.from_buffer(mapped)
        try:
            vector = ctypes.create_string_buffer(end - first)
            address = ctypes.addressof(anchor) + first * _PAGE
            if _LIBC.mincore(address, (end - first) * _PAGE, vector) != 0:
                raise OSError(ctypes.get_errno(), "mincore")
            resident = sum(byte & 1 for byte in vector.raw)
        finally:
            del anchor
            mapped.close()
    return resident, end - first


def _read_all(folder) -> None:
    for name in os.listdir(folder):
        with open(os.path.join(folder, name), "rb") as handle:
            while handle.read(1 << 20):
                pass


@pytest.fixture
def wide():
    torch.manual_seed(0)
    return TinyLM(width=128, depth=6).eval()


def _disk_model(wide, tmp_path):
    folder = save_safetensors_checkpoint(wide, tmp_path / "ckpt", max_shard_size="200KB")
    os.sync()  # dirty pages cannot leave the page cache before they are written
    with init_empty_weights():
        model = TinyLM(width=128, depth=6)
    device_map = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}
    model = load_checkpoint_and_dispatch(
        model, folder, device_map=device_map, offload_folder=tmp_path / "offload"
    )
    return model, folder


def _ranges(prefetcher: Prefetcher, hook) -> list[tuple[str, int, int]]:
    plan = prefetcher.plans[id(hook)] or []
    return [(s.stored.source, s.stored.start, s.stored.nbytes) for s in plan if s.nbytes]


@torch.no_grad()
@pytest.mark.parametrize("map_files", [True, False], ids=["leased-pages", "buffers"])
def test_modules_past_the_cache_bound_leave_the_page_cache(wide, tmp_path, map_files):
    model, folder = _disk_model(wide, tmp_path)
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    hooks_bytes = [plan_bytes(p) for p in model._accel_prefetcher.plans.values() if p]
    prefetcher = attach_prefetcher(model, layers_ahead=2, cache_bytes=sum(hooks_bytes[:2]))
    assert isinstance(prefetcher, Prefetcher)
    prefetcher.map_files = map_files
    streamed = [h for h in prefetcher.hooks if id(h) in prefetcher.streamed]
    kept = [h for h in prefetcher.hooks if id(h) not in prefetcher.streamed]
    # One hook per submodule (norm, up, down of each block): the first two are kept.
    assert len(kept) == 2 and len(streamed) == 3 * 6 - 2 and prefetcher.hooks[:2] == kept
    expected = wide(ids)
    _read_all(folder)
    for _ in range(2):
        torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    attach_prefetcher(model, layers_ahead=0)  # closes it: its evictions are done
    for hook in kept:
        for path, start, nbytes in _ranges(prefetcher, hook):
            resident, pages = resident_pages(path, start, nbytes)
            assert resident == pages, (hook, path, start, nbytes)
    dropped = 0
    for hook in streamed:
        for path, start, nbytes in _ranges(prefetcher, hook):
            resident, pages = resident_pages(path, start, nbytes)
            assert resident == 0, (hook, path, start, nbytes, resident, pages)
            dropped += pages
    assert dropped >= 5 * 2 * 31  # five streamed blocks hold two weights of 32 pages each
    torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)


@torch.no_grad()
def test_no_bound_keeps_every_page(wide, tmp_path):
    model, folder = _disk_model(wide, tmp_path)
    prefetcher = attach_prefetcher(model, layers_ahead=2, cache_bytes=1 << 40)
    assert prefetcher is not None and not prefetcher.streamed
    _read_all(folder)
    model(torch.zeros(1, 3, dtype=torch.long))
    attach_prefetcher(model, layers_ahead=0)
    for hook in prefetcher.hooks:
        for path, start, nbytes in _ranges(prefetcher, hook):
            resident, pages = resident_pages(path, start, nbytes)
            assert resident == pages


def _meminfo() -> dict[str, int]:
    info = {}
    with open("/proc/meminfo") as handle:
        for line in handle:
            name, _, rest = line.partition(":")
            info[name] = int(rest.split()[0]) * 1024
    return info


def test_the_default_bound_leaves_the_mapped_weights_and_a_reserve(wide, monkeypatch):
    held = sum(t.numel() * t.element_size() for t in wide.parameters())  # the tie counts once
    held += sum(t.numel() * t.element_size() for t in wide.buffers())
    info = _meminfo()
    reserve = max(1 << 30, info["MemTotal"] // 10)
    # Weights in private memory are already missing from the available memory: nothing more
    # is taken off.
    assert mapped_weight_bytes(wide) == 0
    bound = default_cache_bytes(wide)
    assert bound is not None
    assert abs(bound - max(0, info["MemAvailable"] - reserve)) < 256 << 20
    # Weights that are maps of files are page cache, which the available memory counts as
    # free: they come off the bound.
    monkeypatch.setattr(_prefetch_attach, "_file_mapped_ranges", lambda: [(0, 1 << 64)])
    assert mapped_weight_bytes(wide) == held
    info = _meminfo()
    bound = default_cache_bytes(wide)
    assert bound is not None
    assert abs(bound - max(0, info["MemAvailable"] - held - reserve)) < 256 << 20
    # Without the process's memory map, the mapped weights are the CPU weights beyond the
    # process's private memory.
    monkeypatch.setattr(_prefetch_attach, "_file_mapped_ranges", lambda: None)
    monkeypatch.setattr(_prefetch_attach, "_anonymous_bytes", lambda: 0)
    info = _meminfo()
    bound = default_cache_bytes(wide)
    assert bound is not None
    assert abs(bound - max(0, info["MemAvailable"] - held - reserve)) < 256 << 20


def test_mapped_weights_are_found_in_the_process_memory_map(wide, tmp_path):
    """The weights a checkpoint's maps hold are counted whatever else the process holds in
    private memory (the estimate from RssAnon would count a large private buffer instead)."""
    folder = save_safetensors_checkpoint(wide, tmp_path / "ckpt", max_shard_size="200KB")
    held = sum(t.numel() * t.element_size() for t in wide.parameters())
    held += sum(t.numel() * t.element_size() for t in wide.buffers())
    with init_empty_weights():
        model = TinyLM(width=128, depth=6)
    mapped = load_checkpoint_and_dispatch(model, folder, device_map={"": "cpu"})
    private = load_checkpoint_and_dispatch(
        TinyLM(width=128, depth=6), folder, device_map={"": "cpu"}, mmap=False
    )
    ballast = torch.ones(64 << 20, dtype=torch.uint8)  # 64 MiB of private memory
    assert mapped_weight_bytes(mapped) == held
    assert mapped_weight_bytes(private) == 0
    # A module's weights, each range counted once however many views share it.
    assert mapped_weight_bytes(mapped.head) == mapped.head.weight.numel() * 4
    del ballast


def _resident_in_memory(tensor: torch.Tensor) -> tuple[int, int]:
    """(pages in memory, whole pages) of a CPU tensor's own bytes (``mincore``: for a map of a
    file, whether the page cache holds each page)."""
    start = tensor.data_ptr()
    end = start + tensor.numel() * tensor.element_size()
    first, last = -(-start // _PAGE) * _PAGE, end // _PAGE * _PAGE
    count = (last - first) // _PAGE
    if count <= 0:
        return 0, 0
    vector = ctypes.create_string_buffer(count)
    if _LIBC.mincore(ctypes.c_void_p(first), count * _PAGE, vector) != 0:
        raise OSError(ctypes.get_errno(), "mincore")
    return sum(byte & 1 for byte in vector.raw), count


_LIBC.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
_MADV_DONTNEED = 4


def _evict_mapped(tensor: torch.Tensor, folder) -> None:
    """Drops a mapped tensor's pages from this process and the checkpoint from the page cache."""
    start = tensor.data_ptr() // _PAGE * _PAGE
    end = tensor.data_ptr() + tensor.numel() * tensor.element_size()
    assert _LIBC.madvise(start, end - start, _MADV_DONTNEED) == 0
    for name in os.listdir(folder):
        descriptor = os.open(os.path.join(folder, name), os.O_RDONLY)
        try:
            os.posix_fadvise(descriptor, 0, 0, os.POSIX_FADV_DONTNEED)
        finally:
            os.close(descriptor)


@torch.no_grad()
def test_weights_mapped_from_the_checkpoint_are_paged_in_as_the_first_forward_starts(
    wide, tmp_path
):
    model, folder = _disk_model(wide, tmp_path)
    prefetcher = model._accel_prefetcher
    assert isinstance(prefetcher, Prefetcher)
    # The weights kept on the CPU are maps of the checkpoint: the embedding (tied to the head)
    # and the scale buffer, once each, in module order.
    assert [t.data_ptr() for t in prefetcher.warm] == [
        model.embed.weight.data_ptr(),
        model.scale.data_ptr(),
    ]
    embedding = model.embed.weight
    _evict_mapped(embedding, folder)
    resident, pages = _resident_in_memory(embedding)
    assert pages >= 5 and resident < pages
    prefetcher.begin_forward()
    for future in prefetcher.warming:
        future.result()
    assert _resident_in_memory(embedding) == (pages, pages)
    # Once: later forwards leave the pages to the kernel.
    assert prefetcher.warm == []
    prefetcher.begin_forward()
    assert prefetcher.warming == []
    ids = torch.randint(0, 50, (2, 5), generator=torch.Generator().manual_seed(1))
    torch.testing.assert_close(model(ids), wide(ids), rtol=0, atol=0)


def test_weights_in_private_memory_are_not_paged_in(wide, tmp_path):
    folder = save_safetensors_checkpoint(wide, tmp_path / "ckpt", max_shard_size="200KB")
    with init_empty_weights():
        model = TinyLM(width=128, depth=6)
    device_map = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}
    model = load_checkpoint_and_dispatch(
        model, folder, device_map=device_map, offload_folder=tmp_path / "offload", mmap=False
    )
    assert isinstance(model._accel_prefetcher, Prefetcher)
    assert model._accel_prefetcher.warm == []


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1GB"])
def test_a_cache_bound_is_a_non_negative_int(wide, tmp_path, bad):
    model, _ = _disk_model(wide, tmp_path)
    with pytest.raises(ValueError, match="cache_bytes"):
        attach_prefetcher(model, cache_bytes=bad)
    with pytest.raises(ValueError, match="cache_bytes"):
        Prefetcher(model._accel_prefetcher.hooks, cache_bytes=bad)


@pytest.mark.skipif(not SUPPORTED, reason="read leases and mremap are Linux's")
def test_pages_under_a_view_in_use_are_not_dropped(tmp_path):
    path = tmp_path / "weights.bin"
    data = bytes(range(256)) * (64 * _PAGE // 256)
    path.write_bytes(data)
    os.sync()  # dirty pages cannot leave the page cache before they are written
    guard = FileGuard(str(path))
    leased = guard.leased_map()
    if leased is None:
        pytest.skip("this file system gives no read lease")
    whole = len(data)  # the whole file: the kernel drops whole folios, which may be large
    try:
        view = leased.view(0, whole, torch.uint8, (whole,))
        assert view is not None
        view[0] = 255  # a write to a view kept past its forward stays (copy-on-write page)
        assert not leased.drop_pages(0, whole)
        guard.drop_cached(0, whole)
        assert int(view[0]) == 255 and int(view[1]) == 1
        assert resident_pages(str(path), 0, whole)[0] > 0
        del view
        gc.collect()
        assert leased.drop_pages(0, whole)
        again = leased.view(0, whole, torch.uint8, (whole,))
        assert again is not None and int(again[0]) == 0  # the file's byte, read again
        del again
        gc.collect()
        guard.drop_cached(0, whole)
        assert resident_pages(str(path), 0, whole) == (0, whole // _PAGE)
    finally:
        guard.close()


class NormLast(torch.nn.Module):
    """A block that registers its norm after the projections that run after it (as a
    transformers decoder layer does): module order is not execution order."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 2 * width)
        self.down = torch.nn.Linear(2 * width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class NormLastStack(torch.nn.Module):
    def __init__(self, width: int = 32, depth: int = 4) -> None:
        super().__init__()
        self.blocks = torch.nn.ModuleList(NormLast(width) for _ in range(depth))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@torch.no_grad()
def test_later_forwards_prepare_the_modules_in_the_order_they_ran(tmp_path):
    from accel_bigmodel import disk_offload

    torch.manual_seed(0)
    model = NormLastStack().eval()
    x = torch.randn(3, 32)
    expected = model(x)
    disk_offload(model, offload_dir=tmp_path / "offload", execution_device=torch.device("cpu"))
    # A window shorter than the model (as in a model of many layers): a module prepared too
    # early falls out of it.
    prefetcher = attach_prefetcher(model, layers_ahead=2)
    assert isinstance(prefetcher, Prefetcher)
    ran: list[str] = []
    names = {id(m): n for n, m in model.named_modules()}
    for module in model.modules():
        if getattr(module, "_hf_hook", None) is not None and not list(module.children()):
            module.register_forward_pre_hook(lambda m, _a: ran.append(names[id(m)]))
    torch.testing.assert_close(model(x), expected, rtol=0, atol=0)
    first_misses = prefetcher.misses
    assert first_misses > 0  # module order: each block's projections were dropped, read again
    owners = {id(m._hf_hook): n for n, m in model.named_modules() if hasattr(m, "_hf_hook")}
    for _ in range(3):
        torch.testing.assert_close(model(x), expected, rtol=0, atol=0)
    assert prefetcher.misses == first_misses  # every module of the later forwards read ahead
    order = [owners[id(h)] for h in prefetcher.hooks]
    assert order == ran[: len(order)]
    assert order[:3] == ["blocks.0.norm", "blocks.0.up", "blocks.0.down"]

"""Linking a dispatched model's offloaded modules to a prefetcher, and the page cache its
files may keep between forwards."""

from __future__ import annotations

import os
from bisect import bisect_right
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from ..placement._memory_budget import _available_cpu_memory, proc_kib_field
from ._prefetch import DEFAULT_LAYERS_AHEAD, Prefetcher

if TYPE_CHECKING:
    from ._align_devices import AlignDevicesHook


def offloaded_hooks(model: nn.Module) -> list[AlignDevicesHook]:
    """The offloading [`AlignDevicesHook`][accel_bigmodel.AlignDevicesHook] objects of a model, in module order."""
    from ._align_devices import AlignDevicesHook
    from ._hooks import SequentialHook

    found: list[AlignDevicesHook] = []
    for module in model.modules():
        hook = getattr(module, "_hf_hook", None)
        stack = [hook]
        while stack:
            current = stack.pop(0)
            if isinstance(current, SequentialHook):
                stack = list(current.hooks) + stack
            elif (
                isinstance(current, AlignDevicesHook)
                and current.offload
                and current.offloaded_names
            ):
                found.append(current)
    return found


def _start_of_forward(module: nn.Module, _args: Any) -> None:
    prefetcher = getattr(module, "_accel_prefetcher", None)
    if isinstance(prefetcher, Prefetcher):
        prefetcher.begin_forward()


def attach_prefetcher(
    model: nn.Module,
    layers_ahead: int = DEFAULT_LAYERS_AHEAD,
    pool_bytes: int | None = None,
    cache_bytes: int | None = None,
) -> Prefetcher | None:
    """Links the offloaded modules of a dispatched ``model`` so their weights are read ahead.

    ``dispatch_model``, ``disk_offload`` and ``cpu_offload`` call it with the defaults; call it
    again to change them (the previous prefetcher stops). Each forward of ``model`` starts reading
    its first offloaded modules at once, so disk reads overlap the compute of the modules held
    in memory too.

    Args:
        model: A model whose offloaded modules carry [`AlignDevicesHook`][accel_bigmodel.AlignDevicesHook] objects.
        layers_ahead: How many offloaded modules are prepared ahead of the running one; ``0``
            turns prefetching off (every module then loads its weights when it runs).
        pool_bytes: The most bytes of weights read ahead from files held at once, the running
            module's included (default: three times the largest offloaded module). A module
            larger than the pool is read when it runs.
        cache_bytes: The most bytes of weights read from files left in the page cache between
            forwards (see [`Prefetcher`][accel_bigmodel.Prefetcher]); the modules past it are
            dropped from the page cache after they run. Default: the memory available now,
            less the model's CPU weights that are maps of files and a reserve of a tenth of
            the memory (at least 1 GiB), so that a model larger than memory reads only what
            cannot stay cached at each forward, instead of every page it evicted itself. A number larger
            than the model keeps every page (the kernel's choice, as before).

    Returns:
        The prefetcher, or ``None`` when there is nothing to prefetch (fewer than two
        offloaded modules, or ``layers_ahead=0``).

    Raises:
        ValueError: when ``layers_ahead``, ``pool_bytes`` or ``cache_bytes`` is negative or
            not an int.

    Example:
        >>> attach_prefetcher(model, layers_ahead=4, pool_bytes=512 * 2**20)
    """
    for name, value in (
        ("layers_ahead", layers_ahead),
        ("pool_bytes", pool_bytes),
        ("cache_bytes", cache_bytes),
    ):
        if value is None and name != "layers_ahead":
            continue
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(
                f"attach_prefetcher: {name} must be an int >= 0; got {value!r}. Pass e.g. "
                f"layers_ahead={DEFAULT_LAYERS_AHEAD}, pool_bytes=512 * 2**20, "
                "cache_bytes=8 * 2**30."
            )
    hooks = offloaded_hooks(model)
    previous = getattr(model, "_accel_prefetcher", None)
    if isinstance(previous, Prefetcher):
        previous.close()
    handle = getattr(model, "_accel_prefetch_handle", None)
    if handle is not None:
        handle.remove()
    for hook in hooks:
        hook.prefetcher = None
    model._accel_prefetcher = None  # type: ignore[assignment]  # stubs: Tensor | Module
    model._accel_prefetch_handle = None  # type: ignore[assignment]
    if len(hooks) < 2 or layers_ahead == 0:
        return None
    if cache_bytes is None:
        cache_bytes = default_cache_bytes(model)
    prefetcher = Prefetcher(
        hooks, layers_ahead=layers_ahead, pool_bytes=pool_bytes, cache_bytes=cache_bytes
    )
    prefetcher.warm = mapped_cpu_weights(model)
    for hook in hooks:
        hook.prefetcher = prefetcher
    model._accel_prefetcher = prefetcher  # type: ignore[assignment]
    model._accel_prefetch_handle = model.register_forward_pre_hook(  # type: ignore[assignment]
        _start_of_forward
    )
    return prefetcher


def _total_memory() -> int:
    """The machine's memory in bytes (0 where it is not known)."""
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _anonymous_bytes() -> int:
    """This process's resident private memory (``RssAnon``), 0 where it is not known."""
    return proc_kib_field("/proc/self/status", "RssAnon") or 0


_NOT_PAGE_CACHE = ("/dev/", "/memfd:", "/SYSV")
"""Mapped paths whose pages are shared memory, not a file's page cache (``MemAvailable``
does not count shared memory as free)."""


def _file_mapped_ranges() -> list[tuple[int, int]] | None:
    """The address ranges this process maps from files (their pages are page cache), sorted;
    ``None`` where ``/proc/self/maps`` cannot be read."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            lines = handle.read().splitlines()
    except OSError:
        return None
    ranges = []
    for line in lines:
        fields = line.split(maxsplit=5)
        # address, permissions, offset, device, inode (0: anonymous), path
        if len(fields) < 6 or fields[4] == "0" or not fields[5].startswith("/"):
            continue
        if fields[5].startswith(_NOT_PAGE_CACHE):
            continue
        low, _, high = fields[0].partition("-")
        ranges.append((int(low, 16), int(high, 16)))
    ranges.sort()
    return ranges


def _cpu_weights(model: nn.Module) -> list[torch.Tensor]:
    """``model``'s non-empty CPU parameters and buffers, in module order."""
    return [
        tensor
        for tensor in (*model.parameters(), *model.buffers())
        if tensor.device.type == "cpu" and tensor.numel()
    ]


def _span(tensor: torch.Tensor) -> tuple[int, int]:
    """The address range of a tensor's elements (from its first one)."""
    return tensor.data_ptr(), tensor.data_ptr() + tensor.numel() * tensor.element_size()


def _cpu_spans(model: nn.Module) -> list[tuple[int, int]]:
    """The address spans of ``model``'s CPU weights (parameters and buffers), merged where they
    overlap (tied weights and views of one storage count once)."""
    spans = sorted(_span(tensor) for tensor in _cpu_weights(model))
    merged: list[tuple[int, int]] = []
    for start, end in spans:
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _mapped_part(start: int, end: int, ranges: list[tuple[int, int]], starts: list[int]) -> int:
    """How many bytes of ``[start, end)`` lie in the sorted ``ranges`` (``starts``: their
    first addresses)."""
    total = 0
    index = max(0, bisect_right(starts, start) - 1)
    while index < len(ranges) and ranges[index][0] < end:
        low, high = ranges[index]
        total += max(0, min(high, end) - max(low, start))
        index += 1
    return total


def mapped_weight_bytes(model: nn.Module) -> int | None:
    """The bytes of ``model``'s CPU weights that are maps of files (the page cache holds
    them), read from this process's memory map; ``None`` where it cannot be read."""
    ranges = _file_mapped_ranges()
    if ranges is None:
        return None
    starts = [low for low, _ in ranges]
    return sum(_mapped_part(start, end, ranges, starts) for start, end in _cpu_spans(model))


def mapped_cpu_weights(model: nn.Module) -> list[torch.Tensor]:
    """``model``'s contiguous CPU weights that lie wholly in maps of files, in module order,
    each memory span once (empty where the process's memory map cannot be read)."""
    ranges = _file_mapped_ranges() or []
    starts = [low for low, _ in ranges]
    found: list[torch.Tensor] = []
    seen: set[tuple[int, int]] = set()
    for tensor in _cpu_weights(model):
        span = _span(tensor)
        if not tensor.is_contiguous() or span in seen:
            continue
        if _mapped_part(*span, ranges, starts) == span[1] - span[0]:
            seen.add(span)
            found.append(tensor.detach())
    return found


def default_cache_bytes(model: nn.Module) -> int | None:
    """The page cache an offloaded model's files may keep between forwards: the memory
    available now, less the weights ``model`` holds on the CPU in memory maps of files (which
    the available memory still counts as free: the page cache) and a reserve of a tenth of the
    memory (at least 1 GiB); ``None`` where the available memory is not known (no limit).

    The mapped weights are found in this process's memory map (``/proc/self/maps``). Where it
    cannot be read, they are estimated as the CPU weights' bytes less the process's resident
    private memory (weights read into private memory, ``mmap=False``, are already missing
    from the available memory)."""
    available, total = _available_cpu_memory(), _total_memory()
    if available <= 0 or total <= 0:
        return None
    mapped = mapped_weight_bytes(model)
    if mapped is None:
        held = sum(end - start for start, end in _cpu_spans(model))
        mapped = max(0, held - _anonymous_bytes())
    reserve = max(1 << 30, total // 10)
    return max(0, available - mapped - reserve)

"""The read side of the prefetcher: where an offloaded module's weights are stored, a bounded
pool of reusable buffers, and the reads that fill one buffer with one module's weights."""

from __future__ import annotations

import threading
from collections.abc import Mapping, MutableMapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, cast

import torch

from ..files._leased_map import shared_elsewhere
from ..files._safetensors_io import writable_buffer
from ._offload import OffloadedWeightsLoader, PrefixedDataset
from ._offload_storage import OffloadStorage, StoredWeight

_ALIGN = 64
READ_CHUNK_BYTES = 8 * 1024 * 1024
"""Bytes one reader thread of the prefetcher reads at a time (bigger tensors are split)."""
READER_THREADS = 4
"""Threads that read one module's weights into a page-locked buffer at once."""


@dataclass(frozen=True)
class TensorSpan:
    """One tensor of an offloaded module, as bytes of a storage.

    Attributes:
        name: The tensor's name inside the module (``"weight"``, ``"sub.bias"``).
        storage: The storage that reads it.
        stored: Where its bytes are (their dtype needs no cast to be used).
    """

    name: str
    storage: OffloadStorage
    stored: StoredWeight

    @property
    def nbytes(self) -> int:
        """Its size in bytes."""
        return self.stored.nbytes


def _aligned(n: int) -> int:
    return (n + _ALIGN - 1) // _ALIGN * _ALIGN


def plan_bytes(plan: list[TensorSpan]) -> int:
    """Bytes of the buffer that holds every tensor of ``plan`` (each starts 64-byte aligned)."""
    return sum(_aligned(span.nbytes) for span in plan)


def loader_of(weights_map: Mapping[str, Any] | None) -> tuple[OffloadedWeightsLoader | None, str]:
    """``(loader, key prefix)`` behind a hook's weights map (``(None, "")`` for a plain map)."""
    prefix = ""
    if isinstance(weights_map, PrefixedDataset):
        prefix, weights_map = weights_map.prefix, weights_map.dataset
    if isinstance(weights_map, OffloadedWeightsLoader):
        return weights_map, prefix
    return None, ""


def read_plan(weights_map: Mapping[str, Any] | None, names: list[str]) -> list[TensorSpan] | None:
    """Where each of ``names`` is stored, or ``None`` when one of them is not a plain span.

    Weights held in memory, or stored in another dtype than the one the loader hands out, have
    no plan: the prefetcher then prepares them the way a synchronous forward would.
    """
    loader, prefix = loader_of(weights_map)
    if loader is None or not names:
        return None
    plan: list[TensorSpan] = []
    for name in names:
        key = f"{prefix}{name}"
        found = loader.weight_span(key)
        if found is None:
            return None
        plan.append(TensorSpan(name, *found))
    return plan


def held_map(
    weights_map: Mapping[str, object] | None,
) -> tuple[MutableMapping[str, torch.Tensor] | None, str, torch.device | None]:
    """``(mapping, key prefix, device)`` of the weights a hook's map holds in memory: the dict
    the lookups read (``None`` for a map of another kind, which could do I/O when indexed) and
    the device its loader moves them to (``None``: as held)."""
    loader, prefix = loader_of(weights_map)
    if loader is not None:
        return loader.state_dict, prefix, loader.device
    if isinstance(weights_map, PrefixedDataset) and isinstance(weights_map.dataset, dict):
        return cast("dict[str, torch.Tensor]", weights_map.dataset), weights_map.prefix, None
    if isinstance(weights_map, dict):
        return cast("dict[str, torch.Tensor]", weights_map), "", None
    return None, "", None


def memory_plan(
    weights_map: Mapping[str, Any] | None, names: list[str]
) -> list[tuple[str, torch.Tensor]] | None:
    """The contiguous CPU tensors held in memory behind ``names``, or ``None`` when one of them
    is not one (a weight read from a file or cast on lookup, or a map of another kind, which
    could do I/O when indexed)."""
    if weights_map is None or not names:
        return None
    held, prefix, device = held_map(weights_map)
    if held is None:
        return None
    found = []
    for name in names:
        tensor = held.get(f"{prefix}{name}")
        if (
            not isinstance(tensor, torch.Tensor)
            or tensor.device.type != "cpu"
            or not tensor.is_contiguous()
            or (device is not None and device != tensor.device)
        ):
            return None
        found.append((name, tensor))
    return found


def memory_bytes(plan: list[tuple[str, torch.Tensor]]) -> int:
    """Bytes of the buffer that holds every tensor of a `memory_plan` (64-byte aligned)."""
    return sum(_aligned(t.numel() * t.element_size()) for _, t in plan)


def copy_into(
    plan: list[tuple[str, torch.Tensor]], buffer: torch.Tensor, readers: Executor | None = None
) -> dict:
    """Copies every tensor of a `memory_plan` into ``buffer``; name -> view of it.

    With ``readers``, the copies are cut into chunks of `READ_CHUNK_BYTES` that its threads
    make at once (a tensor copy releases the GIL).
    """
    values: dict[str, torch.Tensor] = {}
    copies: list[tuple[torch.Tensor, torch.Tensor]] = []
    offset = 0
    for name, tensor in plan:
        nbytes = tensor.numel() * tensor.element_size()
        piece = buffer[offset : offset + nbytes]
        source = tensor.reshape(-1).view(torch.uint8) if nbytes else piece
        step = READ_CHUNK_BYTES if readers is not None else max(nbytes, 1)
        for at in range(0, nbytes, step):
            copies.append((piece[at : at + step], source[at : at + step]))
        values[name] = piece.view(tensor.dtype).view(tensor.shape)
        offset += _aligned(nbytes)
    if readers is None or len(copies) < 2:
        for target, source in copies:
            target.copy_(source)
    else:
        for _ in readers.map(lambda pair: pair[0].copy_(pair[1]), copies):
            pass
    return values


def advise_willneed(plan: list[TensorSpan]) -> None:
    """Asks the storages to start bringing the plan's bytes in now (the kernel reads ahead)."""
    for span in plan:
        span.storage.advise(span.stored)


def fill(
    plan: list[TensorSpan],
    buffer: torch.Tensor,
    loader: OffloadedWeightsLoader | None = None,
    readers: Executor | None = None,
) -> dict:
    """Reads every tensor of ``plan`` into ``buffer``; returns name -> tensor view of it.

    Each source is first checked to be the one its storage opened. With ``loader``, each
    tensor's bytes are checked against the CRC-32 its entry records (once per loader). With
    ``readers``, the reads are cut into chunks of `READ_CHUNK_BYTES` that its threads read
    at once (``preadv`` releases the GIL, so the copies out of the page cache use several cores).

    Raises:
        OffloadedFileChangedError: when a file changed, or a tensor's bytes fail their CRC.
    """
    for span in plan:
        if span.nbytes:
            span.storage.check(span.stored.source, span.stored.key or None)
    values: dict[str, torch.Tensor] = {}
    pieces: list[tuple[TensorSpan, torch.Tensor]] = []
    reads: list[tuple[TensorSpan, int, torch.Tensor]] = []
    offset = 0
    for span in plan:
        piece = buffer[offset : offset + span.nbytes]
        pieces.append((span, piece))
        step = READ_CHUNK_BYTES if readers is not None else max(span.nbytes, 1)
        for at in range(0, span.nbytes, step):
            reads.append((span, at, piece[at : at + step]))
        values[span.name] = piece.view(span.stored.dtype).view(span.stored.shape)
        offset += _aligned(span.nbytes)
    if readers is None or len(reads) < 2:
        for read in reads:
            _read_piece(read)
    else:
        for _ in readers.map(_read_piece, reads):
            pass
    if loader is not None:
        for span, piece in pieces:
            if span.nbytes:
                stored = span.stored
                loader.check_bytes(stored.key, stored.source, stored.start, piece)
    return values


def _read_piece(read: tuple[TensorSpan, int, torch.Tensor]) -> None:
    span, at, piece = read
    span.storage.read_into(span.stored, at, writable_buffer(piece))


class BufferPool:
    """Bytes of prefetched weights, never more than ``capacity`` in all.

    Weights read into the pool's own buffers are counted by buffer: a buffer is either free
    (kept for reuse, so its pages are not faulted in again) or leased to one module; one handed
    back while a tensor outside the pool still uses its memory is left to that tensor and no
    longer counted. Weights prepared outside the pool's buffers are counted by `reserve`
    until given back.

    Args:
        capacity: The most bytes the pool's buffers may hold at once.
        pin: Allocate page-locked buffers (fast asynchronous copies to a CUDA device).
    """

    def __init__(self, capacity: int, pin: bool = False) -> None:
        if capacity < 0:
            raise ValueError(
                f"A prefetch pool's capacity is a number of bytes >= 0; got {capacity}. Pass "
                "pool_bytes=0 to read nothing ahead, or a positive size."
            )
        self.capacity = capacity
        self.pin = pin
        self.held = 0
        self.peak = 0
        self._free: list[torch.Tensor] = []
        self._lock = threading.Lock()

    def acquire(self, nbytes: int) -> torch.Tensor | None:
        """A buffer of at least ``nbytes`` bytes, or ``None`` when the pool has no room now."""
        with self._lock:
            for at, free in enumerate(self._free):
                if free.numel() == nbytes:
                    return self._free.pop(at)
            if not self._count(nbytes):
                return None
        return torch.empty(nbytes, dtype=torch.uint8, pin_memory=self.pin)

    def reserve(self, nbytes: int) -> bool:
        """Counts ``nbytes`` of weights prepared outside the pool's buffers, if they fit."""
        with self._lock:
            return self._count(nbytes)

    def _count(self, nbytes: int) -> bool:
        # Under the lock: counts nbytes more if they fit, dropping free buffers to make room.
        while self._free and self.held + nbytes > self.capacity:
            self.held -= self._free.pop().numel()
        if self.held + nbytes > self.capacity:
            return False
        self.held += nbytes
        self.peak = max(self.peak, self.held)
        return True

    def give_back(self, lease: torch.Tensor | int) -> None:
        """Ends a lease: a byte count from `reserve`, or a buffer from `acquire`
        (reused unless something else still uses its memory)."""
        if isinstance(lease, int):
            with self._lock:
                self.held -= lease
            return
        buffer = lease
        elsewhere = shared_elsewhere(buffer)
        with self._lock:
            if elsewhere is False:
                self._free.append(buffer)
            else:
                self.held -= buffer.numel()

    def clear(self) -> None:
        """Drops the free buffers."""
        with self._lock:
            for buffer in self._free:
                self.held -= buffer.numel()
            self._free.clear()

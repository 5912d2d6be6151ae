"""File bytes onto an accelerator through page-locked staging buffers, in parallel.

A tensor read from a file and then copied to a CUDA device goes through memory twice when done
naively: the file's bytes land in fresh pageable memory (whose pages the kernel zeroes on first
touch), and the driver then copies that memory through a small page-locked bounce buffer of its
own at a fraction of the bus's speed. Here each reader thread owns two page-locked buffers: it
reads the next chunk of the file into one while the device copies the other on the thread's own
stream, so the bus runs at its page-locked speed and the reads of several threads overlap.
"""

from __future__ import annotations

import threading
from typing import Any

import torch

from ..files._safetensors_io import writable_buffer
from ._offload_storage import OffloadStorage, StoredWeight

STAGING_CHUNK_BYTES = 16 * 1024 * 1024
"""Bytes one staging buffer holds (each reader thread has two)."""


class DeviceStaging:
    """Per-thread page-locked buffer pairs for copying stored weights to a device.

    One object serves every reader thread of a load: each thread gets its own two buffers,
    stream and events the first time it copies, so threads never wait for each other. A target
    other than CUDA gets each chunk by a plain copy.

    Args:
        chunk_bytes: Bytes of each staging buffer.
        pin: Allocate page-locked buffers (default: when CUDA is available). Unpinned buffers
            give the same bytes, at the driver's pageable speed.
    """

    def __init__(self, chunk_bytes: int = STAGING_CHUNK_BYTES, pin: bool | None = None) -> None:
        if chunk_bytes < 1:
            raise ValueError(f"chunk_bytes must be >= 1; got {chunk_bytes}.")
        self.chunk_bytes = chunk_bytes
        self.pin = torch.cuda.is_available() if pin is None else pin
        self._local = threading.local()

    def _slots(self, device: torch.device) -> tuple[list[torch.Tensor], list[Any], Any]:
        local = self._local
        if getattr(local, "buffers", None) is None:
            local.buffers = [
                torch.empty(self.chunk_bytes, dtype=torch.uint8, pin_memory=self.pin)
                for _ in range(2)
            ]
            local.streams = {}
        stream = None
        events: list[Any] = [None, None]
        if device.type == "cuda":
            found = local.streams.get(device)
            if found is None:
                found = local.streams[device] = (
                    torch.cuda.Stream(device=device),
                    [torch.cuda.Event(), torch.cuda.Event()],
                )
            stream, events = found
        return local.buffers, events, stream

    def read_to(
        self, storage: OffloadStorage, stored: StoredWeight, device: torch.device
    ) -> torch.Tensor:
        """The weight ``stored`` read through ``storage``, in its stored dtype and shape, on
        ``device``.

        The copy is complete when this returns, so the tensor may be used on any stream.
        """
        out = torch.empty(stored.shape, dtype=stored.dtype, device=device)
        nbytes = stored.nbytes
        if nbytes == 0:
            return out
        flat = out.view(-1).view(torch.uint8)
        buffers, events, stream = self._slots(device)
        if stream is not None:
            stream.wait_stream(torch.cuda.current_stream(device))  # ``out`` was made there
        for number, at in enumerate(range(0, nbytes, self.chunk_bytes)):
            slot = number % 2
            count = min(self.chunk_bytes, nbytes - at)
            if events[slot] is not None:
                events[slot].synchronize()  # the device has finished reading this buffer
            piece = buffers[slot][:count]
            storage.read_into(stored, at, writable_buffer(piece))
            if stream is None:
                flat[at : at + count].copy_(piece)
                continue
            with torch.cuda.stream(stream):
                flat[at : at + count].copy_(piece, non_blocking=True)
                events[slot].record(stream)
        if stream is not None:
            stream.synchronize()
        return out

"""Checks that an offload file is still the file a model opened, before its bytes are used.

A file rewritten in place under a running model hands it other bytes, and one truncated
leaves it fewer. `FileGuard` keeps a descriptor of the file from the moment it is opened
(the offload storages read through it) and compares ``fstat`` of it (size, modification time)
with what it was then: one system call, made before each fetch of a weight reads the file. `verify_crc` compares a weight's bytes with the
CRC-32 recorded when accel wrote them.
"""

from __future__ import annotations

import datetime
import os
import threading
import weakref
import zlib

import torch

from ._leased_map import LeasedMap
from ._safetensors_io import writable_buffer

_RESTORE = (
    "Restore the file (or delete the offload folder and load the model again), then reload the "
    "model: its weights are read from the file at every forward."
)


class OffloadedFileChangedError(RuntimeError):
    """An offloaded weight's file changed under a running model, or no longer holds the bytes
    accel wrote.

    Attributes:
        path: The file.
        weight: The weight being fetched (its offload index key), when known.
    """

    def __init__(self, message: str, path: str, weight: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.weight = weight


def _of(weight: str | None) -> str:
    return f" (fetching weight {weight!r})" if weight else ""


def _when(ns: int) -> str:
    moment = datetime.datetime.fromtimestamp(ns / 1e9, tz=datetime.timezone.utc)
    return moment.isoformat(timespec="milliseconds")


class FileGuard:
    """The size and modification time a file had when it was opened, checked on demand.

    The descriptor stays open, so the check sees the file the model reads even after the path
    names another one (a file renamed over it): that one is not the model's.

    Args:
        path: The file.
        expected_size: The size the file must have now (its header or index says so).

    Raises:
        OffloadedFileChangedError: when the file's size is not ``expected_size``.
        OSError: when the file cannot be opened.
    """

    def __init__(self, path: str, expected_size: int | None = None) -> None:
        self.path = path
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError as err:  # the same class (FileNotFoundError ...), with what to do
            raise OSError(
                err.errno,
                f"An offloaded weight's file must exist and be readable; it cannot be opened "
                f"({err.strerror}). {_RESTORE}",
                path,
            ) from err
        # The lease (once taken) goes before the descriptor, also when the guard is collected
        # unclosed: its views still in use are moved off the file first.
        self._leases: list[LeasedMap] = []
        self._finalizer = weakref.finalize(self, _release, fd, self._leases)
        self._fd = fd
        self.lock = threading.Lock()
        self._lease_tried = False
        stat = os.fstat(fd)
        self.size = stat.st_size if expected_size is None else expected_size
        self.mtime_ns = stat.st_mtime_ns
        if stat.st_size != self.size:
            raise self._resized(stat.st_size, None)

    @property
    def fd(self) -> int:
        """The descriptor of the file as it was opened (reads through it see that file)."""
        return self._fd

    def _resized(self, now: int, weight: str | None) -> OffloadedFileChangedError:
        return OffloadedFileChangedError(
            f"An offload file must keep the size it had when the model opened it; {self.path} "
            f"now has {now} bytes, it had {self.size}{_of(weight)}. It was truncated or extended "
            f"while the model runs. {_RESTORE}",
            self.path,
            weight,
        )

    def check(self, weight: str | None = None) -> None:
        """Raises when the file's size or modification time differs from when it was opened.

        Args:
            weight: The weight being fetched, named in the error.

        Raises:
            OffloadedFileChangedError: naming the file, the weight and what changed.
        """
        stat = os.fstat(self._fd)
        if stat.st_size != self.size:
            raise self._resized(stat.st_size, weight)
        if stat.st_mtime_ns != self.mtime_ns:
            raise OffloadedFileChangedError(
                f"An offload file must not be written while a model reads its weights from it; "
                f"{self.path} was modified at {_when(stat.st_mtime_ns)} (UTC), after the model "
                f"opened it (last modified {_when(self.mtime_ns)}){_of(weight)}. Its bytes may "
                f"no longer be the weights. {_RESTORE}",
                self.path,
                weight,
            )

    def leased_map(self) -> LeasedMap | None:
        """The file under a read lease and mapped (see `LeasedMap`), taken on first call; ``None``
        where no lease can be had or it was given up (the file is then read with copies)."""
        if not self._lease_tried:
            with self.lock:
                if not self._lease_tried:
                    self._lease_tried = True
                    leased = LeasedMap.open(self._fd, self.size, self.path, self.mtime_ns)
                    if leased is not None:
                        self._leases.append(leased)
        first = self._leases[:1]  # emptied when the guard closes
        return first[0] if first and not first[0].broken else None

    def drop_cached(self, start: int, nbytes: int) -> None:
        """Lets the kernel drop the file's bytes ``[start, start + nbytes)`` from the page cache
        (the whole pages inside it; a hint: pages other processes map, or a view still in use
        maps, stay). Takes no lease."""
        leases = self._leases[:1]
        if leases and not leases[0].drop_pages(start, nbytes) and not leases[0].broken:
            return  # a view still in use maps some of these pages: leave them all
        if hasattr(os, "posix_fadvise") and nbytes > 0:
            os.posix_fadvise(self._fd, start, nbytes, os.POSIX_FADV_DONTNEED)

    def close(self) -> None:
        """Releases the lease and the map, if any, and closes the descriptor (later checks fail
        with ``OSError``)."""
        with self.lock:
            self._lease_tried = True
        self._finalizer()


def _release(fd: int, leases: list[LeasedMap]) -> None:
    for leased in leases:
        leased.close()
    leases.clear()
    os.close(fd)


def verify_crc(
    data: torch.Tensor, expected: int, path: str, start: int, weight: str | None
) -> None:
    """Compares the CRC-32 of a contiguous CPU tensor's bytes with the one its index records.

    Args:
        data: The weight as stored (its bytes, not a cast of them).
        expected: The CRC-32 recorded when the weight was written.
        path: The file it was read from.
        start: Offset of its first byte in the file.
        weight: Its offload index key.

    Raises:
        OffloadedFileChangedError: naming the file, the weight, its byte range and both CRCs.
    """
    got = zlib.crc32(writable_buffer(data.contiguous()))
    if got != expected:
        end = start + data.numel() * data.element_size()
        raise OffloadedFileChangedError(
            f"An offloaded weight must match the CRC-32 recorded when accel wrote it; "
            f"{weight!r} in {path} (bytes {start} to {end}) has CRC-32 {got:08x}, the offload "
            f"index records {expected:08x}. The file was damaged after it was written: delete "
            "the offload folder and load or offload the model again.",
            path,
            weight,
        )

"""Computing on an offload file's own pages, safely: a read lease keeps other processes from
shrinking the file while the model uses a memory map of it.

Copying a weight out of the page cache before each use costs a forward about a third of its
time; computing on a memory map of the file costs nothing, but a file truncated by another
process while the map is in use kills the model with SIGBUS. A Linux read lease
(``fcntl(F_SETLEASE, F_RDLCK)``) closes that gap: while it is held, a process that opens the
file for writing or truncates it waits until the holder lets go (or ``/proc/sys/fs/
lease-break-time`` seconds, 45 by default, have passed). `LeasedMap`
holds the lease and a private map of the whole file. When another process asks for the file,
a watching thread (woken by the lease-break signal, which is sent to that thread only) moves
the bytes of every view still in use into anonymous memory at the same addresses (``mremap``:
the tensors keep their memory and their values), stops handing out views, and only then lets
the lease go. The writer goes on; the model reads that file with copies from then on, and
the storage's change check names whatever the writer changed.

Where a lease cannot be taken (not Linux, a file system without leases such as NFS, a file
another process has open for writing, a file this user does not own), the storage copies as
before. A forward that runs longer than the lease-break time on one module's mapped weights
could still meet a truncated file: the kernel breaks a lease by force after that time.
"""

from __future__ import annotations

import ctypes
import errno
import fcntl
import mmap
import os
import signal
import struct
import sys
import threading
import weakref

import torch

F_SETSIG = 10
F_SETOWN_EX = 15
F_OWNER_TID = 0
F_SETLEASE = 1024
F_GETLEASE = 1025
_MREMAP_MAYMOVE = 1
_MREMAP_FIXED = 2
_PAGE = mmap.PAGESIZE
_SIGNAL = signal.SIGURG if hasattr(signal, "SIGURG") else None
"""The lease-break signal: ignored by default, so a break that reaches the process before its
owner is set to the watching thread harms nothing (the thread's periodic check finds it)."""
_PRUNE_AT = 64
"""Views handed out before the ones no longer in use are first dropped from the list."""
_CHECK_SECONDS = 1.0
"""How often the watching thread checks every lease, signal or not."""


def _libc() -> ctypes.CDLL | None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mmap.restype = ctypes.c_void_p
        libc.mmap.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int,
            ctypes.c_long,
        ]  # fmt: skip
        libc.mremap.restype = ctypes.c_void_p
        libc.mremap.argtypes = [
            ctypes.c_void_p, ctypes.c_size_t, ctypes.c_size_t, ctypes.c_int, ctypes.c_void_p,
        ]  # fmt: skip
        libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
        return libc
    except (OSError, AttributeError):
        return None


_LIBC = _libc() if sys.platform.startswith("linux") else None
SUPPORTED = _LIBC is not None and _SIGNAL is not None and hasattr(signal, "sigtimedwait")
"""Whether this platform has leases, ``mremap`` and a thread-directed lease-break signal."""


def shared_elsewhere(base: torch.Tensor) -> bool | None:
    """Whether tensors other than ``base`` use its memory (``None``: torch cannot tell)."""
    counter = getattr(torch._C, "_storage_Use_Count", None)
    if counter is None:
        return None
    # ``base`` and the storage object just made hold one reference each; the object is kept
    # in a name so that it still holds its reference while the count is read (some torch
    # releases do not keep a storage's Python object alive on their own).
    storage = base.untyped_storage()
    return bool(counter(storage._cdata) > 2)


def _in_use(base: torch.Tensor) -> bool:
    """Whether tensors other than ``base`` use its memory (``True`` when torch cannot tell)."""
    return shared_elsewhere(base) is not False


def _privatize(address: int, nbytes: int) -> bool:
    """Replaces the pages under ``[address, address + nbytes)`` of a file map with anonymous
    pages holding the same bytes, in one step (readers see the old or the new page, both with
    these bytes). Returns whether it did."""
    assert _LIBC is not None
    start = address - address % _PAGE
    end = -(-(address + nbytes) // _PAGE) * _PAGE
    length = end - start
    prot = mmap.PROT_READ | mmap.PROT_WRITE
    flags = mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS
    fresh = _LIBC.mmap(None, length, prot, flags, -1, 0)
    if fresh is None or fresh == ctypes.c_void_p(-1).value:
        return False
    ctypes.memmove(fresh, start, length)
    moved = _LIBC.mremap(fresh, length, length, _MREMAP_MAYMOVE | _MREMAP_FIXED, start)
    if moved != start:
        _LIBC.munmap(fresh, length)
        return False
    return True


class LeasedMap:
    """A read lease on an open file and a private map of all of it.

    Use `open`: it returns ``None`` where
    the lease is refused.

    Args:
        fd: A descriptor of the file, opened read-only (the lease belongs to it).
        size: The file's size.
        path: The file (named in messages).
    """

    def __init__(self, fd: int, size: int, path: str) -> None:
        self.fd = fd
        self.path = path
        self.size = size
        self.lock = threading.Lock()
        self.broken = False
        self._views: list[torch.Tensor] = []
        self._prune_at = _PRUNE_AT
        self._map: mmap.mmap | None = mmap.mmap(
            fd, size, flags=mmap.MAP_PRIVATE, prot=mmap.PROT_READ | mmap.PROT_WRITE
        )

    @classmethod
    def open(cls, fd: int, size: int, path: str, mtime_ns: int | None = None) -> LeasedMap | None:
        """Takes a read lease on ``fd`` and maps the file, or returns ``None`` when this
        platform, file system or file allows no lease (the caller then copies), or when the
        file's size (or modification time) is no longer ``size`` (``mtime_ns``) once leased."""
        if _SIGNAL is None or not SUPPORTED or size <= 0:
            return None
        watcher = _watcher()
        if watcher is None:
            return None
        try:
            fcntl.fcntl(fd, F_SETSIG, int(_SIGNAL))
            fcntl.fcntl(fd, F_SETLEASE, fcntl.F_RDLCK)
        except OSError:  # EAGAIN: open for writing somewhere; EACCES: not ours; EINVAL: no leases
            return None
        try:
            fcntl.fcntl(fd, F_SETOWN_EX, struct.pack("ii", F_OWNER_TID, watcher.tid))
            stat = os.fstat(fd)
            if stat.st_size != size or mtime_ns not in (None, stat.st_mtime_ns):
                raise OSError(errno.ESTALE, "changed before the lease")  # no map of it
            leased = cls(fd, size, path)
        except (OSError, ValueError, TypeError, BufferError):
            _unlock(fd)
            return None
        watcher.add(leased)
        return leased

    def view(
        self, start: int, nbytes: int, dtype: torch.dtype, shape: tuple[int, ...]
    ) -> torch.Tensor | None:
        """The file's bytes ``[start, start + nbytes)`` as a tensor of ``dtype`` and ``shape``
        on the file's own pages, or ``None`` once the lease was given up, or when the bytes do
        not start at a multiple of the dtype's size (read them with a copy then)."""
        if nbytes <= 0 or start < 0 or start + nbytes > self.size:
            return None
        with self.lock:
            if self.broken or self._map is None:
                return None
            if len(self._views) >= self._prune_at:  # amortized: not every view, every time
                self._views = [v for v in self._views if _in_use(v)]
                self._prune_at = max(_PRUNE_AT, 2 * len(self._views))
            base = torch.frombuffer(self._map, dtype=torch.uint8, count=nbytes, offset=start)
            if base.data_ptr() % max(1, base[:0].view(dtype).element_size()):
                return None
            # Made under the lock: from here on the tensor handed out counts as a use of
            # ``base`` (see `_in_use`), so `give_up` cannot miss it.
            typed = base.view(dtype).view(shape)
            self._views.append(base)
        return typed

    def drop_pages(self, start: int, nbytes: int) -> bool:
        """Unmaps this process's pages of the file's bytes ``[start, start + nbytes)`` (the
        whole pages inside it), so the kernel may drop them from the page cache. Returns
        ``False`` (and leaves them) when a view still in use overlaps those bytes, or once the
        lease was given up. Reading a dropped page again reads the file, which the lease keeps
        unchanged."""
        first = -(-start // _PAGE) * _PAGE
        end = min(start + nbytes, self.size) // _PAGE * _PAGE
        with self.lock:
            if self.broken or self._map is None:
                return False
            if end <= first:
                return True
            origin = self._origin()
            for base in self._views:
                offset = base.data_ptr() - origin
                if offset < end and offset + base.numel() > first and _in_use(base):
                    return False  # a view kept past its module's forward: its pages stay
            self._map.madvise(mmap.MADV_DONTNEED, first, end - first)
        return True

    def _origin(self) -> int:
        """The address of the map's first byte."""
        assert self._map is not None
        return torch.frombuffer(self._map, dtype=torch.uint8, count=1).data_ptr()

    def give_up(self) -> int:
        """Stops handing out views, moves the bytes of the views still in use off the file,
        then releases the lease (the process waiting for the file goes on). Returns the bytes
        moved. Called by the watching thread when another process asks for the file."""
        with self.lock:
            if self.broken:
                return 0
            self.broken = True
            moved = 0
            views, self._views = self._views, []
            kept = True
            for base in views:
                if not _in_use(base):
                    continue
                address = base.data_ptr()
                if _privatize(address, base.numel()):
                    moved += base.numel()
                else:  # no memory for the copy: keep the lease (the kernel ends it in time)
                    kept = False
            if kept:
                _unlock(self.fd)
            return moved

    def close(self) -> None:
        """Gives the lease up (see `give_up`: views still in use keep their bytes, on memory of
        the process) and releases the map once no view uses it."""
        self.give_up()
        _unlock(self.fd)
        # Not ``close()``: that unmaps the pages under tensors still in use (``frombuffer``
        # keeps the map object, not an export of it). The map goes with its last reference.
        self._map = None

    def held(self) -> bool:
        """Whether the lease is held and nobody asks for the file."""
        try:
            return fcntl.fcntl(self.fd, F_GETLEASE) == fcntl.F_RDLCK
        except OSError:
            return False


def _unlock(fd: int) -> None:
    try:
        fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
    except OSError:
        pass


class _Watcher:
    """The thread that gives up a lease as soon as another process asks for its file.

    The lease-break signal of every leased descriptor is directed at this thread, which blocks
    it and waits for it (so no other thread of the process is interrupted); it also checks every
    lease each `_CHECK_SECONDS`.
    """

    def __init__(self) -> None:
        self.maps: weakref.WeakSet[LeasedMap] = weakref.WeakSet()
        self.lock = threading.Lock()
        ready = threading.Event()
        self.tid = 0
        self.thread = threading.Thread(
            target=self._run, args=(ready,), name="accel-offload-lease", daemon=True
        )
        self.thread.start()
        ready.wait()

    def add(self, leased: LeasedMap) -> None:
        with self.lock:
            self.maps.add(leased)

    def _run(self, ready: threading.Event) -> None:
        assert _SIGNAL is not None
        signal.pthread_sigmask(signal.SIG_BLOCK, {_SIGNAL})
        self.tid = threading.get_native_id()
        ready.set()
        while True:
            signal.sigtimedwait({_SIGNAL}, _CHECK_SECONDS)
            with self.lock:
                maps = list(self.maps)
            for leased in maps:
                if not leased.broken and not leased.held():
                    leased.give_up()


_WATCHER: _Watcher | None = None
_WATCHER_LOCK = threading.Lock()


def _watcher() -> _Watcher | None:
    global _WATCHER
    with _WATCHER_LOCK:
        if _WATCHER is None or not _WATCHER.thread.is_alive():
            try:
                _WATCHER = _Watcher()
            except RuntimeError:  # no new thread at interpreter shutdown
                return None
        return _WATCHER

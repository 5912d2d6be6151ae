"""Where offloaded weights live: the storage protocol, its registry, and file-backed storage.

An offload index entry names a weight; an [`OffloadStorage`][accel_bigmodel.OffloadStorage] turns the entry into a
[`StoredWeight`][accel_bigmodel.StoredWeight] (where its bytes are), checks that their source is still what it was when
it was opened, and reads spans of those bytes into memory the caller owns. The loader, the
prefetcher and the staging path to a device only ever read through a storage, so no weight is
computed on from memory mapped from a file another process may shrink: a file truncated under a
running model is a short read, reported as an [`OffloadedFileChangedError`][accel_bigmodel.OffloadedFileChangedError], not a SIGBUS. File storages
also hand out views of a file's own pages while this process holds a read lease on it
(`FileStorage.mapped`): a writer then waits until those pages are moved into process memory.

A new kind of storage is one class and one call to [`register_offload_storage`][accel_bigmodel.register_offload_storage].
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

import torch

from ..files._file_guard import FileGuard, OffloadedFileChangedError


@dataclass(frozen=True)
class StoredWeight:
    """One weight as stored: a span of bytes of one source.

    Attributes:
        source: What holds the bytes (a file path for file storage); named in errors and used
            for the change check.
        start: Offset of the first byte in the source.
        nbytes: Size of the weight in bytes.
        dtype: The dtype the bytes are stored in.
        shape: The weight's shape.
        key: The weight's offload index key (named in errors).
    """

    source: str
    start: int
    nbytes: int
    dtype: torch.dtype
    shape: tuple[int, ...]
    key: str = ""


@runtime_checkable
class OffloadStorage(Protocol):
    """One kind of offload storage, opened for one offload folder.

    Implementations are used from several threads at once (the prefetcher's readers). A storage
    may also have ``evict(stored)``, which lets go of cached bytes of ``stored`` that will not
    be read again soon (the file storages drop them from the page cache); the prefetcher calls
    it for the modules past its page-cache bound
    ([`Prefetcher.cache_bytes`][accel_bigmodel.Prefetcher]).
    """

    def locate(self, key: str, entry: Mapping[str, Any]) -> StoredWeight:
        """Where the bytes of the weight ``key`` described by the index ``entry`` are; opens
        their source the first time (what the change check compares with later).

        Raises:
            OffloadedFileChangedError: when the source no longer matches the entry.
        """
        ...

    def check(self, source: str, key: str | None = None) -> None:
        """Raises [`OffloadedFileChangedError`][accel_bigmodel.OffloadedFileChangedError] (naming ``key``) when ``source`` changed
        since [`locate`][accel_bigmodel.OffloadStorage.locate] opened it."""
        ...

    def read_into(self, stored: StoredWeight, offset: int, buffer: memoryview) -> None:
        """Fills ``buffer`` with the bytes of ``stored`` from ``offset`` (relative to its
        start) on; a source that ends too soon is an [`OffloadedFileChangedError`][accel_bigmodel.OffloadedFileChangedError]."""
        ...

    def advise(self, stored: StoredWeight) -> None:
        """Hints that ``stored`` will be read soon (a storage may do nothing)."""
        ...

    def write(
        self,
        group: str,
        tensors: Sequence[tuple[str, torch.Tensor]],
        dtypes: Mapping[str, torch.dtype] | None = None,
    ) -> dict[str, dict[str, Any]]:
        """Stores ``tensors`` (cast to ``dtypes`` where given) under ``group`` (a file name
        for file layouts); returns their index entries."""
        ...

    def close(self) -> None:
        """Releases what the storage holds open."""
        ...


StorageFactory = Callable[[Any], OffloadStorage]
"""Makes a storage for an offload folder (``None`` when the loader has none)."""


@dataclass(frozen=True)
class _Registration:
    name: str
    factory: StorageFactory
    claims: Callable[[Mapping[str, Any]], bool]


_REGISTRY: list[_Registration] = []
_REGISTRY_LOCK = threading.Lock()
STORAGE_KEY = "storage"
"""Index entry key naming the storage of a weight explicitly."""


def register_offload_storage(
    name: str,
    factory: StorageFactory,
    claims: Callable[[Mapping[str, Any]], bool] | None = None,
) -> None:
    """Makes a kind of offload storage known to every [`OffloadedWeightsLoader`][accel_bigmodel.OffloadedWeightsLoader].

    An index entry with ``"storage": name`` uses it; so does an entry for which ``claims``
    returns ``True`` (storages registered later are asked first). Registering a name again
    replaces its earlier registration.

    Args:
        name: The storage's name, as written in index entries.
        factory: Called with the loader's offload folder (or ``None``); returns the storage.
        claims: Recognises the storage's entries by their keys (default: only entries naming
            it).

    Raises:
        ValueError: when ``name`` is not a non-empty string or ``factory`` is not callable.

    Example:
        >>> register_offload_storage("memory", MemoryStorage)
    """
    if not isinstance(name, str) or not name:
        raise ValueError(
            f"An offload storage's name must be a non-empty string; got {name!r}. Pass the "
            "name its index entries carry under 'storage'."
        )
    if not callable(factory):
        raise ValueError(
            f"An offload storage's factory must be callable (folder -> storage); got "
            f"{factory!r} for {name!r}. Pass the storage class or a function making one."
        )
    registration = _Registration(name, factory, claims or (lambda _entry: False))
    with _REGISTRY_LOCK:
        _REGISTRY[:] = [r for r in _REGISTRY if r.name != name]
        _REGISTRY.append(registration)


def register_builtin_storage(
    name: str, factory: StorageFactory, claims: Callable[[Mapping[str, Any]], bool]
) -> None:
    """Registers a storage of this package: asked after every storage registered from outside,
    whenever either was registered."""
    with _REGISTRY_LOCK:
        if not any(r.name == name for r in _REGISTRY):
            _REGISTRY.insert(0, _Registration(name, factory, claims))


def _registrations() -> list[_Registration]:
    from . import _offload_layouts  # noqa: F401  (registers the built-in storages)

    with _REGISTRY_LOCK:
        return list(_REGISTRY)


def storage_name(key: str, entry: Mapping[str, Any]) -> str:
    """The registered storage that holds the weight of index entry ``entry``.

    Raises:
        ValueError: when the entry names an unknown storage, or no storage claims it.
    """
    if not isinstance(entry, Mapping):
        raise ValueError(
            "Each entry of an offload index must be an object describing one weight; "
            f"{key!r} holds {type(entry).__name__} {entry!r:.80}. The offload folder is stale or "
            "corrupted: delete it and load the checkpoint again."
        )
    registrations = _registrations()
    named = entry.get(STORAGE_KEY)
    if named is not None:
        if any(r.name == named for r in registrations):
            return str(named)
        raise ValueError(
            f"An offload index entry's 'storage' must name a registered storage "
            f"({sorted(r.name for r in registrations)}); {key!r} names {named!r}. Register it "
            "with register_offload_storage before loading the model."
        )
    for registration in reversed(registrations):
        if registration.claims(entry):
            return registration.name
    raise ValueError(
        f"An offload index entry must be claimed by a registered storage; no storage claims "
        f"{key!r} ({sorted(entry)}). Register one with register_offload_storage."
    )


def open_storage(name: str, folder: str | None) -> OffloadStorage:
    """A new storage of the registered kind ``name`` for ``folder``."""
    factory = next(r.factory for r in _registrations() if r.name == name)
    return factory(folder)


class FileStorage:
    """The reading half of a storage whose sources are files: one guarded descriptor per file.

    Each file is opened once (`guard`); its descriptor serves the change check (``fstat``)
    and every read (positional, so threads share it), so the bytes read are those of the file
    the model opened even after another file is renamed over its path. Subclasses implement
    `locate` and `write` for their layout.

    Args:
        folder: The offload folder (relative sources resolve against it).
    """

    def __init__(self, folder: str | None = None) -> None:
        self.folder = folder
        self._guards: dict[str, FileGuard] = {}
        self._lock = threading.Lock()

    def guard(self, path: str, expected_size: int | None = None) -> FileGuard:
        """The guard of ``path``, opened now if needed (then its size must be
        ``expected_size`` when given)."""
        guard = self._guards.get(path)
        if guard is None:
            with self._lock:
                guard = self._guards.get(path)
                if guard is None:
                    guard = self._guards[path] = FileGuard(path, expected_size=expected_size)
        return guard

    def check(self, source: str, key: str | None = None) -> None:
        self.guard(source).check(key)

    def read_into(self, stored: StoredWeight, offset: int, buffer: memoryview) -> None:
        guard = self.guard(stored.source)
        at = stored.start + offset
        done = 0
        while done < len(buffer):
            got = _pread(guard, buffer[done:], at + done)
            if not got:
                guard.check(stored.key or None)  # names the new size when it was truncated
                raise OffloadedFileChangedError(
                    f"An offload file must hold every byte its index names; {stored.source} "
                    f"ends before byte {at + len(buffer)} (fetching weight {stored.key!r}). It "
                    "was truncated while the model reads it: restore the file, then reload the "
                    "model.",
                    stored.source,
                    stored.key or None,
                )
            done += got

    def mapped(self, stored: StoredWeight) -> torch.Tensor | None:
        """``stored`` as a tensor on the pages of its file, under the file's read lease (see
        `accel_bigmodel.files._leased_map`), or ``None`` when the file has no lease (read it
        with `read_into` then)."""
        if stored.nbytes <= 0:
            return None
        leased = self.guard(stored.source).leased_map()
        if leased is None:
            return None
        return leased.view(stored.start, stored.nbytes, stored.dtype, stored.shape)

    def can_map(self, source: str) -> bool:
        """Whether ``source`` is under a read lease now (`mapped` then hands out views)."""
        return self.guard(source).leased_map() is not None

    def advise(self, stored: StoredWeight) -> None:
        if hasattr(os, "posix_fadvise") and stored.nbytes:
            fd = self.guard(stored.source).fd
            os.posix_fadvise(fd, stored.start, stored.nbytes, os.POSIX_FADV_WILLNEED)

    def evict(self, stored: StoredWeight) -> None:
        """Lets the kernel drop ``stored``'s bytes from the page cache: they were used and will
        not be needed again soon (optional in a storage; the prefetcher calls it for modules
        streamed through a page cache too small to keep them)."""
        guard = self._guards.get(stored.source)
        if guard is not None and stored.nbytes:
            guard.drop_cached(stored.start, stored.nbytes)

    def close(self) -> None:
        with self._lock:
            guards, self._guards = list(self._guards.values()), {}
        for guard in guards:
            guard.close()


def _pread(guard: FileGuard, view: memoryview, at: int) -> int:
    if hasattr(os, "preadv"):
        return os.preadv(guard.fd, [view], at)
    with guard.lock:  # no positional reads here: seek and read under the guard's lock
        os.lseek(guard.fd, at, os.SEEK_SET)
        data = os.read(guard.fd, len(view))
    view[: len(data)] = data
    return len(data)

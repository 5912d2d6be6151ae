"""The two built-in offload storages: tensors inside safetensors files (an offload file accel
wrote, or a checkpoint used in place) and one raw ``.dat`` file per tensor."""

from __future__ import annotations

import math
import os
import threading
import zlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..files._contained import contained_path
from ..files._safetensors_io import (
    SafetensorsFile,
    st_dtype_name,
    writable_buffer,
    write_safetensors,
)
from ..placement._sizes import resolve_dtype
from ._offload_storage import FileStorage, StoredWeight, register_builtin_storage

INDEX_FILE = "index.json"


class SafetensorsStorage(FileStorage):
    """Tensors of safetensors files; an entry holds ``{"safetensors_file", "weight_name",
    "dtype"}`` (a relative file resolves against the offload folder)."""

    def __init__(self, folder: str | None = None) -> None:
        super().__init__(folder)
        self._files: dict[str, SafetensorsFile] = {}
        self._files_lock = threading.Lock()

    def file(self, path: str) -> SafetensorsFile:
        """The (cached) header of a safetensors file, its guard opened with it."""
        if not os.path.isabs(path) and self.folder is not None:
            path = os.path.join(self.folder, path)
        handle = self._files.get(path)
        if handle is None:
            with self._files_lock:
                handle = self._files.get(path)
                if handle is None:
                    handle = SafetensorsFile(path)
                    self.guard(path, expected_size=handle.size)
                    self._files[path] = handle
        return handle

    def tensor(self, file: SafetensorsFile, name: str, key: str = "") -> StoredWeight:
        """Tensor ``name`` of an open ``file`` as a stored weight of this storage."""
        with self._files_lock:
            self._files.setdefault(file.path, file)
        self.guard(file.path, expected_size=file.size)
        start, end = file.span(name)
        shape = tuple(file.shape(name))
        return StoredWeight(file.path, start, end - start, file.dtype(name), shape, key or name)

    def locate(self, key: str, entry: Mapping[str, Any]) -> StoredWeight:
        file = self.file(entry["safetensors_file"])
        return self.tensor(file, entry.get("weight_name", key), key)

    def write(
        self,
        group: str,
        tensors: Sequence[tuple[str, torch.Tensor]],
        dtypes: Mapping[str, torch.dtype] | None = None,
    ) -> dict[str, dict[str, Any]]:
        folder = self.folder or "."
        os.makedirs(folder, exist_ok=True)
        crcs: dict[str, int] = {}
        write_safetensors(
            Path(folder) / group, list(tensors), dtypes=dict(dtypes or {}), crc32s=crcs
        )
        casts = dtypes or {}
        return {
            name: {
                "safetensors_file": group,
                "weight_name": name,
                "dtype": st_dtype_name(casts.get(name, t.dtype)),
                "shape": list(t.shape),
                "crc32": crcs[name],
            }
            for name, t in tensors
        }


def _dat_entry(key: str, entry: Mapping[str, object]) -> tuple[torch.dtype, tuple[int, ...]]:
    """The dtype and shape of a ``.dat`` index entry, checked before any size is computed.

    Raises:
        ValueError: when the entry lacks either, or holds something that is not one.
    """
    dtype_name, shape = entry.get("dtype"), entry.get("shape")
    if not isinstance(dtype_name, str) or not isinstance(shape, list):
        raise ValueError(
            "An offload index entry of a .dat file must hold 'dtype' (a name like 'float16') and "
            f"'shape' (a list of whole numbers); {key!r} holds dtype={dtype_name!r}, "
            f"shape={shape!r}. The offload folder is stale or corrupted: delete it and load the "
            "checkpoint again."
        )
    if not all(type(d) is int and 0 <= d < 2**62 for d in shape):
        raise ValueError(
            "An offload index entry's 'shape' must be a list of whole numbers from 0 up; "
            f"{key!r} has {shape!r}. The offload folder is stale or corrupted: delete it and load "
            "the checkpoint again."
        )
    dtype = resolve_dtype(dtype_name)
    assert dtype is not None
    return dtype, tuple(shape)


class DatStorage(FileStorage):
    """One raw file ``{folder}/{key}.dat`` per tensor; an entry holds ``{"dtype", "shape"}``."""

    def locate(self, key: str, entry: Mapping[str, Any]) -> StoredWeight:
        if self.folder is None:
            raise KeyError(f"{key!r} is a .dat entry but the loader has no save_folder.")
        folder = os.fspath(self.folder)
        # A file that resolves (through a link) outside the folder is refused unread.
        path = contained_path(folder, f"{key}.dat", os.path.join(folder, INDEX_FILE), key)
        return self.in_file(path, key, entry)

    def in_file(self, path: str, key: str, entry: Mapping[str, Any]) -> StoredWeight:
        """The weight of ``entry`` as the whole of file ``path``.

        Raises:
            ValueError: when the file's size is not the entry's shape times its itemsize.
        """
        dtype, shape = _dat_entry(key, entry)
        nbytes = math.prod(shape) * torch.empty((), dtype=dtype).element_size()
        stored = StoredWeight(path, 0, nbytes, dtype, shape, key)
        if nbytes == 0:
            return stored
        size = self.guard(path).size
        if size != nbytes:
            raise ValueError(
                f"An offloaded weight file must hold shape x itemsize bytes; {path} has {size} "
                f"bytes but its index entry says {list(shape)} of {dtype} ({nbytes} bytes). The "
                "offload folder is stale or corrupted: delete it and load the checkpoint again."
            )
        return stored

    def write(
        self,
        group: str,
        tensors: Sequence[tuple[str, torch.Tensor]],
        dtypes: Mapping[str, torch.dtype] | None = None,
    ) -> dict[str, dict[str, Any]]:
        folder = self.folder or "."
        os.makedirs(folder, exist_ok=True)
        entries: dict[str, dict[str, Any]] = {}
        for name, tensor in tensors:
            data = tensor.detach().cpu()
            cast = (dtypes or {}).get(name)
            if cast is not None:
                data = data.to(cast)
            data = data.contiguous()
            raw = writable_buffer(data)
            with open(os.path.join(folder, f"{name}.dat"), "wb") as handle:
                handle.write(raw)
            entries[name] = {
                "dtype": st_dtype_name(data.dtype),
                "shape": list(data.shape) or [1],
                "crc32": zlib.crc32(raw),
            }
        return entries


# The safetensors layout is asked before the .dat one, which takes every other entry.
register_builtin_storage("safetensors", SafetensorsStorage, lambda e: "safetensors_file" in e)
register_builtin_storage("dat", DatStorage, lambda _entry: True)

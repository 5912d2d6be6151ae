"""Weights kept on disk: the offload index, its writers, and the loader that reads weights
through the registered offload storages."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator, Mapping
from typing import Any, Union

import torch
from torch import nn

from ..files._contained import check_offload_entries
from ..files._file_guard import verify_crc
from ..files._progress import progress
from ..files._safetensors_io import writable_buffer
from ..placement._sizes import resolve_dtype
from ..placement._tensors import Device, normalize_device, set_module_tensor_to_device
from ._offload_layouts import INDEX_FILE, DatStorage, SafetensorsStorage
from ._offload_storage import OffloadStorage, StoredWeight, open_storage, storage_name

PathLike = Union[str, "os.PathLike[str]"]


def read_offload_index(folder: PathLike) -> dict[str, Any]:
    """The entries of ``{folder}/index.json`` (``{}`` when the file does not exist).

    Raises:
        ValueError: naming the file when it is not a JSON object.
    """
    path = os.path.join(folder, INDEX_FILE)
    if not os.path.isfile(path):
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            index = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"an offload index must be a JSON object (weight name -> entry); {path} is not valid "
            f"JSON ({exc}). Delete the offload folder and offload the weights again."
        ) from None
    if not isinstance(index, dict):
        raise ValueError(
            f"an offload index must be a JSON object (weight name -> entry); {path} holds a "
            f"{type(index).__name__}. Delete the offload folder and offload the weights again."
        )
    check_offload_entries(os.fspath(folder), index, path)
    return index


def offload_weight(
    weight: torch.Tensor,
    weight_name: str,
    offload_folder: PathLike,
    index: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Writes one tensor as raw bytes to ``{offload_folder}/{weight_name}.dat``.

    Args:
        weight: The tensor to write (moved to CPU, made contiguous).
        weight_name: Its name; also the file stem.
        offload_folder: Destination folder (created if needed).
        index: The index to update with ``{"dtype", "shape", "crc32"}`` (the CRC-32 of the
            bytes written, checked when the weight is first read back).

    Returns:
        The updated index.
    """
    entries = DatStorage(os.fspath(offload_folder)).write("", [(weight_name, weight)])
    if index is None:
        index = {}
    index.update(entries)
    return index


def load_offloaded_weight(weight_file: PathLike, weight_info: Mapping[str, Any]) -> torch.Tensor:
    """Reads a ``.dat`` tensor written by [`offload_weight`][accel_bigmodel.offload_weight] into memory.

    Raises:
        ValueError: when the file's size is not the entry's shape times its itemsize.
    """
    path = os.fspath(weight_file)
    storage = DatStorage(os.path.dirname(path) or ".")
    try:
        where = storage.in_file(path, os.path.basename(path), weight_info)
        tensor = torch.empty(where.shape, dtype=where.dtype)
        if where.nbytes:
            storage.read_into(where, 0, writable_buffer(tensor))
    finally:
        storage.close()
    return tensor


def save_offload_index(index: Mapping[str, Any], offload_folder: PathLike) -> None:
    """Merges ``index`` into ``{offload_folder}/index.json``."""
    if not index:
        return
    os.makedirs(offload_folder, exist_ok=True)
    path = os.path.join(offload_folder, INDEX_FILE)
    current = read_offload_index(offload_folder)
    current.update(index)
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(current, handle, indent=2)


def offload_state_dict(save_dir: PathLike, state_dict: Mapping[str, torch.Tensor]) -> None:
    """Writes a state dict to ``save_dir`` as one ``.dat`` file per tensor plus ``index.json``.

    Args:
        save_dir: Destination folder.
        state_dict: Tensors to offload.
    """
    os.makedirs(save_dir, exist_ok=True)
    index: dict[str, Any] = {}
    total = sum(t.numel() * t.element_size() for t in state_dict.values())
    with progress(total, "Offloading weights", unit="B") as bar:
        for name, tensor in state_dict.items():
            index = offload_weight(tensor, name, save_dir, index=index)
            bar.update(tensor.numel() * tensor.element_size())
    save_offload_index(index, save_dir)


class PrefixedDataset(Mapping):
    """A read-only view of a mapping whose keys are ``prefix + key`` of the original.

    Args:
        dataset: The underlying mapping.
        prefix: The prefix to prepend on lookups.
    """

    def __init__(self, dataset: Mapping[str, Any], prefix: str) -> None:
        self.dataset = dataset
        self.prefix = prefix

    def __getitem__(self, key: str) -> Any:
        return self.dataset[f"{self.prefix}{key}"]

    def __iter__(self) -> Iterator[str]:
        return iter(k[len(self.prefix) :] for k in self.dataset if k.startswith(self.prefix))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        return f"{self.prefix}{key}" in self.dataset


class OffloadedWeightsLoader(Mapping):
    """A mapping name -> tensor over an in-memory state dict and weights offloaded to disk.

    Disk weights come from an index (``index.json`` of ``save_folder``). Each entry is read
    through the registered offload storage that claims it (see
    [`register_offload_storage`][accel_bigmodel.register_offload_storage]): a raw ``.dat`` file (``{"dtype", "shape"}``), a tensor
    inside a safetensors file (``{"safetensors_file", "weight_name", "dtype"}``), or a storage
    registered from outside. Each lookup reads the weight's bytes into fresh memory of the
    process: nothing is computed from a memory map of a file another process may shrink.

    Every lookup of a disk weight first checks (one ``fstat``) that its file still has the size
    and modification time it had when the loader opened it, and a read that finds the file
    shorter is an error too, so a file truncated or rewritten under a running model is an
    [`OffloadedFileChangedError`][accel_bigmodel.OffloadedFileChangedError] naming it, not a crash (SIGBUS) or other bytes. A weight
    whose entry records a ``crc32`` (files accel wrote) has its bytes checked against it the
    first time it is read.

    Args:
        state_dict: Tensors held in memory (looked up first).
        save_folder: Folder with ``index.json`` and the offloaded files.
        index: The index itself (read from ``save_folder`` when omitted).
        device: Move looked-up tensors to this device.
    """

    def __init__(
        self,
        state_dict: Mapping[str, torch.Tensor] | None = None,
        save_folder: PathLike | None = None,
        index: Mapping[str, Any] | None = None,
        device: Device | None = None,
    ) -> None:
        if state_dict is None and save_folder is None and index is None:
            raise ValueError(
                "OffloadedWeightsLoader needs weights: pass state_dict=, save_folder= or index=."
            )
        self.state_dict = dict(state_dict or {})
        self.save_folder = None if save_folder is None else str(save_folder)
        if index is None and self.save_folder is not None:
            index = read_offload_index(self.save_folder)
        self.index = dict(index or {})
        self.all_keys = list(self.state_dict)
        self.all_keys.extend(k for k in self.index if k not in self.state_dict)
        self.device = None if device is None else normalize_device(device)
        self._storages: dict[str, OffloadStorage] = {}
        self._located: dict[str, tuple[OffloadStorage, StoredWeight]] = {}
        self._verified: set[tuple[str, int]] = set()
        self._lock = threading.Lock()

    def stored(self, key: str) -> tuple[OffloadStorage, StoredWeight]:
        """The storage of index entry ``key`` and where in it the weight's bytes are (its
        source is opened on first use)."""
        found = self._located.get(key)
        if found is None:
            info = self.index[key]
            name = storage_name(key, info)
            with self._lock:
                storage = self._storages.get(name)
                if storage is None:
                    storage = self._storages[name] = open_storage(name, self.save_folder)
            found = (storage, storage.locate(key, info))
            self._located[key] = found
        return found

    def check_bytes(self, key: str, path: str, start: int, stored: torch.Tensor) -> None:
        """Checks a weight's bytes against the CRC-32 its entry records, once per loader.

        Args:
            key: The index entry.
            path: The file the bytes come from.
            start: Offset of the first byte in the file.
            stored: The bytes as stored (the weight before any cast).

        Raises:
            OffloadedFileChangedError: when the CRC-32 differs.
        """
        expected = self.index[key].get("crc32")
        if expected is None or (path, start) in self._verified:
            return
        if isinstance(expected, bool) or not isinstance(expected, int):
            raise ValueError(
                f"An offload index entry's crc32 must be an int (the CRC-32 of the weight's "
                f"bytes); {key!r} has {expected!r}. The index is corrupted: delete the offload "
                "folder and load or offload the model again."
            )
        verify_crc(stored, expected, path, start, key)
        self._verified.add((path, start))

    def disk_view(self, key: str) -> torch.Tensor:
        """The weight of an index entry, read from its storage into new memory, in the entry's
        dtype.

        Raises:
            OffloadedFileChangedError: when its file changed since the loader opened it, or its
                bytes differ from the CRC-32 recorded when accel wrote them.
        """
        storage, where = self.stored(key)
        tensor = torch.empty(where.shape, dtype=where.dtype)
        if where.nbytes:
            storage.check(where.source, key)
            storage.read_into(where, 0, writable_buffer(tensor))
            self.check_bytes(key, where.source, where.start, tensor)
        wanted = resolve_dtype(self.index[key].get("dtype"))
        if wanted is not None and tensor.dtype != wanted:
            tensor = tensor.to(wanted)
        return tensor

    def weight_span(self, key: str) -> tuple[OffloadStorage, StoredWeight] | None:
        """``(storage, stored weight)`` of a disk entry whose stored bytes are used as they
        are, or ``None`` (entry held in memory, cast on lookup, or not readable as indexed:
        its lookup raises the error)."""
        if key in self.state_dict or key not in self.index:
            return None
        try:
            storage, where = self.stored(key)
        except (OSError, ValueError, KeyError):
            return None
        wanted = resolve_dtype(self.index[key].get("dtype"))
        if wanted is not None and wanted != where.dtype:
            return None
        return storage, where

    def __getitem__(self, key: str) -> torch.Tensor:
        if key in self.state_dict:
            tensor = self.state_dict[key]
        elif key in self.index:
            tensor = self.disk_view(key)
        else:
            raise KeyError(
                f"{key!r} is neither in the in-memory weights nor in the offload index "
                f"({len(self.index)} entries)."
            )
        if self.device is not None and tensor.device != self.device:
            tensor = tensor.to(self.device)
        return tensor

    def __contains__(self, key: object) -> bool:
        return key in self.state_dict or key in self.index

    def __iter__(self) -> Iterator[str]:
        return iter(self.all_keys)

    def __len__(self) -> int:
        return len(self.all_keys)


def extract_submodules_state_dict(
    state_dict: Mapping[str, torch.Tensor], submodule_names: list[str]
) -> dict[str, torch.Tensor]:
    """Keeps the entries of ``state_dict`` that belong to one of ``submodule_names``."""
    result: dict[str, torch.Tensor] = {}
    for module_name in submodule_names:
        prefix = f"{module_name}." if module_name else ""
        for key, value in state_dict.items():
            if key == module_name or key.startswith(prefix):
                result[key] = value
    return result


def load_offloaded_weights(
    model: nn.Module, index: Mapping[str, Any], offload_folder: PathLike
) -> None:
    """Loads every weight listed in ``index`` from ``offload_folder`` into ``model`` on the CPU."""
    if not index:
        return
    loader = OffloadedWeightsLoader(save_folder=offload_folder, index=index)
    for name in index:
        set_module_tensor_to_device(model, name, "cpu", value=loader[name].clone())


def write_offload_file(
    folder: PathLike,
    file_name: str,
    tensors: list[tuple[str, torch.Tensor]],
    dtypes: dict[str, torch.dtype] | None = None,
) -> dict[str, Any]:
    """Writes tensors into one safetensors file of the offload folder; returns index entries
    (each with the CRC-32 of the bytes written, checked when the weight is first read back).

    Args:
        folder: The offload folder.
        file_name: File name inside ``folder``.
        tensors: ``(name, tensor)`` pairs, written one at a time.
        dtypes: Cast these tensors to the given dtype as they are written.
    """
    return SafetensorsStorage(os.fspath(folder)).write(file_name, tensors, dtypes)

"""Reading safetensors files through one memory map each, and writing them in a stream."""

from __future__ import annotations

import ctypes
import json
import math
import os
import struct
import threading
import zlib
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, Union

import torch

PathLike = Union[str, "os.PathLike[str]"]

_ST_TO_TORCH: dict[str, torch.dtype] = {
    "F64": torch.float64,
    "F32": torch.float32,
    "F16": torch.float16,
    "BF16": torch.bfloat16,
    "I64": torch.int64,
    "I32": torch.int32,
    "I16": torch.int16,
    "I8": torch.int8,
    "U8": torch.uint8,
    "BOOL": torch.bool,
    "C64": torch.complex64,
}
for _name, _attr in (
    ("F8_E4M3", "float8_e4m3fn"),
    ("F8_E5M2", "float8_e5m2"),
    ("U16", "uint16"),
    ("U32", "uint32"),
    ("U64", "uint64"),
):
    if hasattr(torch, _attr):
        _ST_TO_TORCH[_name] = getattr(torch, _attr)
_TORCH_TO_ST = {v: k for k, v in _ST_TO_TORCH.items()}

_MAX_HEADER = 100 * 1024 * 1024


def writable_buffer(tensor: torch.Tensor) -> memoryview:
    """A writable byte view of a contiguous CPU tensor's memory (no copy)."""
    nbytes = tensor.numel() * tensor.element_size()
    if nbytes == 0:
        return memoryview(bytearray(0))
    raw = (ctypes.c_ubyte * nbytes).from_address(tensor.data_ptr())
    return memoryview(raw).cast("B")


class CorruptSafetensorsError(ValueError):
    """Raised when a file is not a well-formed safetensors file."""


class SafetensorsFile:
    """A safetensors file whose header is read once and whose data is memory-mapped once.

    ``view(name)`` returns a tensor backed by the page cache (no copy); ``read_into`` copies one
    tensor straight from the file into existing memory with a single read.
    """

    def __init__(self, path: PathLike) -> None:
        self.path = str(path)
        self.size = os.path.getsize(self.path)
        self.header, self.metadata, self.data_start = _read_header(self.path, self.size)
        self._storage: torch.Tensor | None = None
        self._lock = threading.Lock()

    def keys(self) -> list[str]:
        return list(self.header)

    def __contains__(self, name: object) -> bool:
        return name in self.header

    def dtype(self, name: str) -> torch.dtype:
        return _ST_TO_TORCH[self.header[name]["dtype"]]

    def shape(self, name: str) -> list[int]:
        return list(self.header[name]["shape"])

    def span(self, name: str) -> tuple[int, int]:
        """Absolute byte offsets ``(start, end)`` of a tensor in the file."""
        begin, end = self.header[name]["data_offsets"]
        return self.data_start + begin, self.data_start + end

    def _mapped(self) -> torch.Tensor:
        if self._storage is None:
            with self._lock:
                if self._storage is None:
                    self._storage = torch.from_file(
                        self.path, shared=False, size=self.size, dtype=torch.uint8
                    )
        return self._storage

    def view(self, name: str) -> torch.Tensor:
        """Zero-copy tensor over the mapped file (copy-on-write: the file is never modified)."""
        start, end = self.span(name)
        dtype, shape = self.dtype(name), self.shape(name)
        if start == end:
            return _no_elements(shape, dtype)
        raw = self._mapped()[start:end]
        itemsize = torch.empty((), dtype=dtype).element_size()
        if start % itemsize:
            raw = raw.clone()
        return raw.view(dtype).view(shape)

    def destination(self, name: str, out: torch.Tensor) -> tuple[int, memoryview]:
        """``(file offset, writable bytes of out)`` to read tensor ``name`` into ``out`` (a
        contiguous CPU tensor of the stored dtype and size)."""
        start, end = self.span(name)
        buffer = writable_buffer(out)
        if len(buffer) != end - start:
            raise ValueError(
                f"Tensor {name!r} of {self.path} holds {end - start} bytes but the destination "
                f"holds {len(buffer)}; they must match."
            )
        return start, buffer

    def read_into(self, name: str, out: torch.Tensor) -> None:
        """Reads tensor ``name`` into ``out`` (contiguous CPU tensor of the stored dtype and size)."""
        start, buffer = self.destination(name, out)
        read_span(self.path, start, buffer)

    def load(self, name: str) -> torch.Tensor:
        """A fresh in-memory copy of tensor ``name``."""
        start, end = self.span(name)
        if start == end:
            return _no_elements(self.shape(name), self.dtype(name))
        out = torch.empty(self.shape(name), dtype=self.dtype(name))
        self.read_into(name, out)
        return out

    def advise_willneed(self, names: Iterable[str]) -> None:
        """Asks the kernel to start reading the given tensors into the page cache."""
        if not hasattr(os, "posix_fadvise"):
            return
        try:
            fd = os.open(self.path, os.O_RDONLY)
        except OSError:
            return
        try:
            for name in names:
                start, end = self.span(name)
                os.posix_fadvise(fd, start, end - start, os.POSIX_FADV_WILLNEED)
        finally:
            os.close(fd)


def read_span(path: str, offset: int, buffer: memoryview, fd: int | None = None) -> None:
    """Read ``len(buffer)`` bytes of file ``path`` at ``offset`` into ``buffer``.

    With ``fd`` (a descriptor of ``path``) the reads are positional, so threads can share the
    descriptor; otherwise, or where ``preadv`` is missing, the span opens a handle of its own.
    """
    if fd is not None and hasattr(os, "preadv"):
        _fill(lambda view, at: os.preadv(fd, [view], at), offset, buffer, path)
        return
    with open(path, "rb", buffering=0) as handle:
        handle.seek(offset)
        _fill(lambda view, _at: handle.readinto(view), offset, buffer, path)


def _fill(read: Any, offset: int, buffer: memoryview, path: str) -> None:
    done = 0
    while done < len(buffer):
        got = read(buffer[done:], offset + done)
        if not got:
            raise CorruptSafetensorsError(
                f"{path} ends before byte {offset + len(buffer)}; the file is truncated. "
                "Re-download or re-save it."
            )
        done += got


def _corrupt(path: str, rule: str) -> CorruptSafetensorsError:
    return CorruptSafetensorsError(
        f"A safetensors file must start with an 8-byte header length and a JSON header that "
        f"describes its tensors; {path} does not ({rule}). The file is corrupted or not "
        f"safetensors: re-download or re-save it."
    )


def _read_header(path: str, size: int) -> tuple[dict[str, Any], dict[str, str], int]:
    if size < 8:
        raise _corrupt(path, f"it is only {size} bytes long")
    with open(path, "rb") as handle:
        (length,) = struct.unpack("<Q", handle.read(8))
        if length > min(size - 8, _MAX_HEADER):
            raise _corrupt(path, f"header length {length} exceeds the file size {size}")
        raw = handle.read(length)
    try:
        header = json.loads(raw, parse_int=_json_int)
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise _corrupt(path, f"its header is not JSON: {exc}") from None
    if not isinstance(header, dict):
        raise _corrupt(path, "its header is not a JSON object")
    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    elif not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise _corrupt(
            path, f"its __metadata__ is not a map of strings to strings: {metadata!r:.80}"
        )
    data_start = 8 + length
    data_size = size - data_start
    spans: list[tuple[int, int, str]] = []
    for name, info in header.items():
        try:
            dtype = _ST_TO_TORCH[info["dtype"]]
            shape = list(info["shape"])
            begin, end = info["data_offsets"]
        except (KeyError, TypeError, ValueError):
            raise _corrupt(
                path, f"entry {name!r} has a malformed or unknown dtype/shape/offsets"
            ) from None
        if not all(_is_int(x) for x in (*shape, begin, end)):
            raise _corrupt(
                path,
                f"entry {name!r} has shape {shape} and offsets {[begin, end]}; each must be a "
                "JSON integer, as the safetensors library requires",
            )
        if any(d < 0 for d in shape):
            raise _corrupt(path, f"tensor {name!r} has a negative dimension in shape {shape}")
        if any(d > _MAX_DIM for d in shape):
            raise _corrupt(
                path,
                f"tensor {name!r} has shape {shape}; a dimension must be at most 2**63 - 1, the "
                "largest size torch can index",
            )
        itemsize = torch.empty((), dtype=dtype).element_size()
        expected = math.prod(shape) * itemsize
        if not 0 <= begin <= end <= data_size or end - begin != expected:
            raise _corrupt(
                path,
                f"tensor {name!r} claims bytes [{begin}, {end}) for shape {shape} but the data "
                f"section has {data_size} bytes",
            )
        spans.append((begin, end, name))
    _check_tiling(path, sorted(spans), data_size)
    return header, metadata, data_start


_MAX_DIM = 2**63 - 1


def _json_int(text: str) -> int | float:
    """An integer of the header. ``-0`` stays a float, as the safetensors library reads it
    (and then refuses it where a size or an offset is due)."""
    value = int(text)
    return -0.0 if value == 0 and text.startswith("-") else value


def _no_elements(shape: list[int], dtype: torch.dtype) -> torch.Tensor:
    """A tensor of ``shape`` holding no element (one dimension is 0). Made by viewing an empty
    tensor: ``torch.empty`` refuses a shape whose strides overflow even when it holds nothing,
    and the safetensors library reads such a shape."""
    return torch.empty(0, dtype=dtype).view(shape)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_tiling(path: str, spans: list[tuple[int, int, str]], data_size: int) -> None:
    """The tensors' byte ranges, in offset order, must follow one another from byte 0 to the
    end of the file, as the safetensors library requires: no overlap, no gap, no trailing bytes."""
    reached = 0
    for begin, end, name in spans:
        if begin != reached:
            what = "overlaps the tensor before it" if begin < reached else "leaves a gap"
            raise _corrupt(
                path,
                f"tensor {name!r} starts at data byte {begin} but the tensors before it end at "
                f"{reached}: it {what}",
            )
        reached = end
    if reached != data_size:
        raise _corrupt(
            path, f"the tensors end at data byte {reached} but the data section has {data_size}"
        )


def write_safetensors(
    path: PathLike,
    tensors: Iterable[tuple[str, torch.Tensor]] | dict[str, torch.Tensor],
    metadata: dict[str, str] | None = None,
    dtypes: dict[str, torch.dtype] | None = None,
    *,
    durable: bool = False,
    crc32s: dict[str, int] | None = None,
) -> dict[str, tuple[int, int]]:
    """Writes tensors to a safetensors file one at a time (no full copy of the set in memory).

    Args:
        path: Destination file (overwritten; written to a temporary name then renamed; the
            temporary file is removed when the write fails).
        tensors: ``(name, tensor)`` pairs or a dict; each tensor is made contiguous and moved to
            the CPU just before it is written.
        metadata: String metadata stored in the header.
        dtypes: Store these tensors cast to the given dtype (each cast happens just before its
            tensor is written, so at most one converted tensor exists at a time).
        durable: Flush the file to stable storage before the rename (a crash then leaves
            either the previous file or the complete new one, never a torn one).
        crc32s: When given, filled with the CRC-32 (``zlib.crc32``) of each tensor's bytes as
            written.

    Returns:
        ``{name: (start, end)}`` absolute byte offsets of each tensor in the file.
    """
    items = list(tensors.items()) if isinstance(tensors, dict) else list(tensors)
    casts = dtypes or {}
    header: dict[str, Any] = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, tensor in items:
        stored = casts.get(name, tensor.dtype)
        if stored not in _TORCH_TO_ST:
            raise ValueError(
                f"safetensors can store {sorted(str(d) for d in _TORCH_TO_ST)}; tensor {name!r} "
                f"has dtype {stored}. Cast it first."
            )
        nbytes = tensor.numel() * torch.empty((), dtype=stored).element_size()
        header[name] = {
            "dtype": _TORCH_TO_ST[stored],
            "shape": list(tensor.shape),
            "data_offsets": [offset, offset + nbytes],
        }
        offset += nbytes
    encoded = json.dumps(header, separators=(",", ":")).encode()
    encoded += b" " * (-len(encoded) % 8)
    data_start = 8 + len(encoded)
    target = Path(path)
    tmp = target.with_name(target.name + ".tmp")
    spans: dict[str, tuple[int, int]] = {}
    try:
        with open(tmp, "wb") as handle:
            handle.write(struct.pack("<Q", len(encoded)))
            handle.write(encoded)
            for name, tensor in items:
                data = tensor.detach()
                if data.device.type != "cpu":
                    data = data.cpu()
                if name in casts and data.dtype != casts[name]:
                    data = data.to(casts[name])
                data = data.contiguous()
                raw = writable_buffer(data)
                handle.write(raw)
                if crc32s is not None:
                    crc32s[name] = zlib.crc32(raw)
                begin, end = header[name]["data_offsets"]
                spans[name] = (data_start + begin, data_start + end)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        os.replace(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)  # a full disk keeps no partial file
        raise
    return spans


def iter_safetensors(path: PathLike) -> Iterator[tuple[str, torch.Tensor]]:
    """Yields ``(name, memory-mapped tensor)`` for every tensor of a file."""
    handle = SafetensorsFile(path)
    for name in handle.keys():
        yield name, handle.view(name)


def st_dtype_name(dtype: torch.dtype) -> str:
    """The ``torch`` name of a dtype without the ``torch.`` prefix (``"float16"``)."""
    return str(dtype).replace("torch.", "")

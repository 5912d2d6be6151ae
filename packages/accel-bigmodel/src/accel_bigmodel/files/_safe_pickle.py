"""Reading pickled files without running what they hold.

A pickle can name any importable function and call it while it is read, so a tampered
checkpoint file can run code on the machine that loads it. Every pickle this library reads
goes through one of two restricted readers, unless the caller opts in by name:

- [`safe_torch_load`][accel_bigmodel.safe_torch_load] for ``torch.save`` files: ``torch.load(weights_only=True)`` (tensors,
  numbers, strings, containers, and the few extra classes the caller names).
- [`read_dcp_metadata_safely`][accel_bigmodel.read_dcp_metadata_safely] for the ``.metadata`` file of a ``torch.distributed.checkpoint``
  folder: an unpickler that builds only the checkpoint's metadata classes, and
  [`safe_dcp_load`][accel_bigmodel.safe_dcp_load], which loads such a folder with that reader and reads its non-tensor
  entries with ``weights_only=True``.
"""

from __future__ import annotations

import io
import math
import os
import pickle
import re
import struct
import zipfile
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from ._contained import contained_path, shown

__all__ = [
    "UntrustedPickleError",
    "read_dcp_metadata_safely",
    "safe_dcp_load",
    "safe_torch_load",
]

_DCP_METADATA_FILE = ".metadata"
_DCP_METADATA_CLASSES = frozenset(
    {
        ("torch.distributed.checkpoint.metadata", name)
        for name in (
            "BytesStorageMetadata",
            "ChunkStorageMetadata",
            "Metadata",
            "MetadataIndex",
            "StorageMeta",
            "TensorProperties",
            "TensorStorageMetadata",
            "_MEM_FORMAT_ENCODING",
        )
    }
    | {
        ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
        ("torch", "Size"),
        ("torch.serialization", "_get_layout"),
        ("collections", "OrderedDict"),
    }
    # Paths, pickled from ``pathlib`` (Python < 3.13) or ``pathlib._local`` (3.13 and later).
    | {
        (module, name)
        for module in ("pathlib", "pathlib._local")
        for name in ("PosixPath", "PurePosixPath", "WindowsPath", "PureWindowsPath")
    }
)
"""The globals a DCP ``.metadata`` pickle of FSDP 1 and 2 sharded saves names (found by
unpickling real ones), besides torch dtypes, which are accepted by type."""

_GLOBAL_IN_MESSAGE = re.compile(r"GLOBAL ([A-Za-z_][\w.]*)")


class UntrustedPickleError(pickle.UnpicklingError, ValueError):
    """A file holds a pickled object outside the allow-list; it was refused without running.

    Also a ``ValueError``: the file's content is the problem, as for other malformed files.

    Attributes:
        path: The refused file.
        refused_global: The first disallowed global it names (``"posix.system"`` ...), or
            ``None`` when the reader could not tell.
    """

    def __init__(self, message: str, path: str = "", refused_global: str | None = None) -> None:
        super().__init__(message)
        self.path = path
        self.refused_global = refused_global

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent between processes (torch.distributed.checkpoint gathers errors): keep the fields.
        return (type(self), (str(self), self.path, self.refused_global))


def _refusal(path: str, refused: str | None, reader: str, opt_in: str) -> UntrustedPickleError:
    what = f"the global {refused!r}" if refused else "an object outside the allow-list"
    return UntrustedPickleError(
        f"files read from a checkpoint must not run code while they load, so {reader} accepts "
        f"only tensors, numbers, strings, containers and known checkpoint classes; {path} names "
        f"{what} and was refused without running it. If you trust this file and where it came "
        f"from, opt in with {opt_in}; otherwise do not load it.",
        path,
        refused,
    )


def _first(found: re.Match[str] | None) -> str | None:
    return found.group(1) if found else None


def _unusual_global(path: str) -> str | None:
    """The first global a pickle names outside torch and the standard containers (read with
    ``pickletools``, which runs nothing), for files torch's reader refused for another reason
    (e.g. an opcode of a newer pickle protocol) before it reached the global."""
    import pickletools

    try:
        if _is_zip(path):
            with zipfile.ZipFile(path) as archive:
                name = next(n for n in archive.namelist() if n.endswith("data.pkl"))
                data = archive.read(name)
        else:
            with open(path, "rb") as handle:
                data = handle.read()
        strings: list[str] = []
        for opcode, arg, _ in pickletools.genops(data):
            if opcode.name in ("GLOBAL", "INST"):
                found = str(arg).replace(" ", ".")
            elif opcode.name == "STACK_GLOBAL" and len(strings) >= 2:
                found = f"{strings[-2]}.{strings[-1]}"
            else:
                if isinstance(arg, str):
                    strings.append(arg)
                continue
            if not found.startswith(("torch.", "collections.OrderedDict", "builtins.")):
                return found
    except Exception:
        return None
    return None


def _is_zip(path: str) -> bool:
    """Whether ``path`` reads as a zip archive (a damaged end record is no zip: torch's reader
    then names the damage)."""
    try:
        return zipfile.is_zipfile(path)
    except (OSError, zipfile.BadZipFile):  # e.g. a zip64 end record naming several disks
        return False


def safe_torch_load(
    path: str | os.PathLike[str],
    *,
    allowed_globals: Iterable[Any] = (),
    trust_pickles: bool = False,
    opt_in: str = "trust_pickles=True",
    map_location: Any = "cpu",
    mmap: bool | None = None,
    **load_kwargs: Any,
) -> Any:
    """``torch.load`` a file without running code from it, unless ``trust_pickles``.

    Args:
        path: A ``torch.save`` file (zip or legacy format).
        allowed_globals: Extra classes or functions the file may name (added to torch's
            ``weights_only`` allow-list for this call only).
        trust_pickles: Read with ``weights_only=False``: the file may run any code. Only for
            files the user trusts, by the user's explicit choice.
        opt_in: How the user opts in, quoted in the refusal (e.g. ``"--trust_pickles"``).
        map_location: Where tensors go (default: the CPU).
        mmap: Memory-map tensor data (default: when the file is in the zip format).
        **load_kwargs: More ``torch.load`` arguments; ``weights_only`` is decided by
            ``trust_pickles`` and refused here.

    Returns:
        The loaded object.

    Raises:
        UntrustedPickleError: naming the file, the disallowed global and ``opt_in``.
        ValueError: when ``load_kwargs`` holds ``weights_only``.
    """
    if load_kwargs.pop("weights_only", True) is not True:
        raise ValueError(
            "files are read with weights_only=True so that a tampered file cannot run code; got "
            "weights_only=False among the load arguments. Drop it; "
            f"to read a trusted file with other objects, opt in with {opt_in}."
        )
    name = os.fspath(path)
    use_mmap = _is_zip(name) if mmap is None else mmap
    kwargs = {"map_location": map_location, "mmap": use_mmap, **load_kwargs}
    if trust_pickles:
        return torch.load(name, weights_only=False, **kwargs)
    source: Any = name
    if not use_mmap and not _is_zip(name):
        # The legacy format is unpickled straight from the file, and torch's restricted
        # unpickler reads each string or bytes object by the length the file states: a file
        # object allocates that length before reading (a tampered length asks for terabytes),
        # an in-memory copy hands back only the bytes there are.
        with open(name, "rb") as handle:
            source = io.BytesIO(handle.read())
    try:
        with torch.serialization.safe_globals(list(allowed_globals)):
            return torch.load(source, weights_only=True, **kwargs)
    except pickle.UnpicklingError as exc:
        refused = _first(_GLOBAL_IN_MESSAGE.search(str(exc))) or _unusual_global(name)
        raise _refusal(name, refused, "torch.load(weights_only=True)", opt_in) from None
    except (
        RuntimeError,
        EOFError,
        ValueError,
        TypeError,
        KeyError,
        IndexError,
        struct.error,  # a length or number cut short by the end of the file
    ) as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        raise RuntimeError(
            f"torch.load reads files written by torch.save; {name} is not one, or is damaged "
            f"or truncated ({type(exc).__name__}: {first}). Copy or save the file again."
        ) from None


# --------------------------------------------------------------------------- DCP
class _MetadataUnpickler(pickle._Unpickler):
    # The pure-Python unpickler, over the file's bytes in memory: its memo is a dict, so a
    # tampered memo index of billions allocates nothing (the C unpickler grows an array to
    # it), and each read hands back only the bytes there are (the C one allocates a stated
    # length first). A metadata file is small, so the speed does not matter.
    def __init__(self, handle: Any, path: str, opt_in: str) -> None:
        super().__init__(handle)
        self._path = path
        self._opt_in = opt_in

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _DCP_METADATA_CLASSES:
            return super().find_class(module, name)
        if module == "torch" and isinstance(getattr(torch, name, None), torch.dtype):
            return getattr(torch, name)
        reader = "the DCP metadata reader"
        raise _refusal(self._path, f"{module}.{name}", reader, self._opt_in)


def read_dcp_metadata_safely(
    checkpoint_dir: str | os.PathLike[str],
    *,
    trust_pickles: bool = False,
    opt_in: str = "trust_pickles=True",
    rank: int | None = None,
) -> Any:
    """Read the ``.metadata`` of a ``torch.distributed.checkpoint`` folder without running code.

    Only the metadata classes of ``torch.distributed.checkpoint``, torch dtypes, sizes,
    layouts and paths are built; any other global is refused before it is looked up.

    Args:
        checkpoint_dir: The DCP folder.
        trust_pickles: Unpickle with no restriction (a trusted file with other objects).
        opt_in: How the user opts in, quoted in the refusal.
        rank: Read the per-rank ``__<rank>.metadata`` instead.

    Returns:
        The folder's ``torch.distributed.checkpoint.metadata.Metadata``.

    Raises:
        FileNotFoundError: when the folder holds no metadata file.
        UntrustedPickleError: naming the file, the disallowed global and ``opt_in``.
    """
    file_name = _DCP_METADATA_FILE if rank is None else f"__{rank}{_DCP_METADATA_FILE}"
    path = os.path.join(os.fspath(checkpoint_dir), file_name)
    if not os.path.isfile(path):
        raise FileNotFoundError(
            f"a torch.distributed.checkpoint folder holds a {file_name!r} file; {path!r} does not "
            "exist. Pass the folder the sharded checkpoint was saved to."
        )
    with open(path, "rb") as file:
        handle = io.BytesIO(file.read())
        try:
            if trust_pickles:
                metadata = pickle.load(handle)
            else:
                metadata = _MetadataUnpickler(handle, path, opt_in).load()
        except UntrustedPickleError:
            raise
        except Exception as exc:  # a damaged pickle fails in any of the classes it builds
            raise ValueError(
                f"a DCP metadata file is a pickle of torch.distributed.checkpoint's Metadata; "
                f"{path} does not unpickle ({type(exc).__name__}: {exc}). The file is damaged "
                "or truncated: copy the checkpoint folder again, or save it again."
            ) from None
    from torch.distributed.checkpoint.metadata import Metadata

    if not isinstance(metadata, Metadata):
        raise ValueError(
            f"a DCP metadata file holds a torch.distributed.checkpoint Metadata object; {path} "
            f"holds a {type(metadata).__name__}. Pass an intact checkpoint folder."
        )
    _check_tensor_entries(metadata, path)
    _check_storage_entries(metadata, os.fspath(checkpoint_dir), path)
    return metadata


def _dims(value: Any) -> bool:
    """A shape, offset or size list of a DCP entry: ints >= 0 that, like their product, fit
    63 bits (a dimension past them next to a 0 has a product of 0)."""
    try:
        dims = list(value)
    except (TypeError, ValueError, OverflowError):  # torch.Size of an int past 64 bits
        return False
    ok = all(isinstance(d, int) and not isinstance(d, bool) and 0 <= d < 2**63 for d in dims)
    return ok and math.prod(dims) < 2**63


def _check_tensor_entries(metadata: Any, path: str) -> None:
    """Refuse tensor entries whose shape, dtype or chunks are not what DCP writes."""
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    entries = getattr(metadata, "state_dict_metadata", None)
    if not isinstance(entries, Mapping):
        raise ValueError(
            f"a DCP metadata file maps each saved name to its metadata; {path} holds a "
            f"{type(entries).__name__} there. Pass an intact checkpoint folder."
        )
    for key, meta in entries.items():
        if not isinstance(key, str):
            raise ValueError(
                f"a DCP metadata file names each saved entry by a string; {path} has the key "
                f"{shown(key)}. Pass an intact checkpoint folder."
            )
        if not isinstance(meta, TensorStorageMetadata):
            continue
        dtype = getattr(getattr(meta, "properties", None), "dtype", None)
        chunks: Any = getattr(meta, "chunks", None)
        size: Any = getattr(meta, "size", None)
        good = isinstance(dtype, torch.dtype) and _dims(size) and isinstance(chunks, list)
        if good:
            good = all(
                _dims(getattr(c, "offsets", None))
                and _dims(getattr(c, "sizes", None))
                and len(c.offsets) == len(c.sizes) == len(size)
                for c in chunks
            )
        if not good:
            raise ValueError(
                f"a DCP tensor entry has a shape of ints >= 0, a torch dtype and chunks of the "
                f"same rank; {path} gives {shown(key)} shape {shown(size)}, dtype {shown(dtype)}. Pass an "
                "intact checkpoint folder."
            )


def _check_storage_entries(metadata: Any, folder: str, path: str) -> None:
    """Refuse storage entries that name a file outside ``folder`` or a negative range."""
    storage = getattr(metadata, "storage_data", None)
    if storage is None:  # no stored item: the readers then find every tensor's bytes missing
        storage = metadata.storage_data = {}
    if not isinstance(storage, Mapping):
        raise ValueError(
            f"a DCP metadata file maps each stored item to its file; {path} holds a "
            f"{type(storage).__name__} there. Pass an intact checkpoint folder."
        )
    for index, info in storage.items():
        fqn = getattr(index, "fqn", index)
        entry = fqn if isinstance(fqn, str) else shown(fqn)
        contained_path(folder, getattr(info, "relative_path", None), path, entry)
        offset, length = getattr(info, "offset", None), getattr(info, "length", None)
        if not all(
            isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in (offset, length)
        ):
            raise ValueError(
                f"a DCP storage entry reads a byte range (offset and length, ints >= 0); {path} "
                f"gives entry {entry!r} offset {shown(offset)} and length {shown(length)}. Pass an intact "
                "checkpoint folder."
            )


def _safe_reader(checkpoint_dir: str, metadata: Any, trust_pickles: bool, opt_in: str) -> Any:
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any) -> Any:
            rank = kwargs.get("rank")
            if rank is None:
                found = metadata  # read (and checked) once, before DCP starts
            else:
                found = read_dcp_metadata_safely(
                    checkpoint_dir, trust_pickles=trust_pickles, opt_in=opt_in, rank=rank
                )
            if getattr(found, "storage_meta", None) is None:
                found.storage_meta = StorageMeta()
            found.storage_meta.load_id = self.load_id
            return found

    return SafeReader(checkpoint_dir)


def _safe_planner(checkpoint_dir: str, trust_pickles: bool, opt_in: str) -> Any:
    from torch.distributed.checkpoint import DefaultLoadPlanner

    class SafePlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item: Any, value: io.BytesIO) -> None:
            if not trust_pickles:
                where = f"{checkpoint_dir} (entry {read_item.dest_index.fqn!r})"
                try:
                    torch.load(value, weights_only=True)
                except pickle.UnpicklingError as exc:
                    found = _GLOBAL_IN_MESSAGE.search(str(exc))
                    reader = "torch.load(weights_only=True)"
                    raise _refusal(where, _first(found), reader, opt_in) from None
                value.seek(0)
            # Proven to name only allowed globals: DCP's own (unrestricted) read is now safe.
            super().load_bytes(read_item, value)

    return SafePlanner()


def safe_dcp_load(
    state_dict: Mapping[str, Any],
    checkpoint_dir: str | os.PathLike[str],
    *,
    trust_pickles: bool = False,
    opt_in: str = "trust_pickles=True",
    no_dist: bool = False,
) -> None:
    """``torch.distributed.checkpoint.load`` that runs no code from the folder.

    The ``.metadata`` file goes through [`read_dcp_metadata_safely`][accel_bigmodel.read_dcp_metadata_safely] and non-tensor entries
    through ``torch.load(weights_only=True)`` (DCP's own reader uses plain pickle for both).

    Args:
        state_dict: The state dict to fill in place (as for ``dcp.load``).
        checkpoint_dir: The DCP folder.
        trust_pickles: Read both with no restriction (a trusted folder with other objects).
        opt_in: How the user opts in, quoted in the refusal.
        no_dist: Load on a single process without a process group.

    Raises:
        UntrustedPickleError: naming the file or entry, the disallowed global and ``opt_in``.
    """
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.api import CheckpointException

    folder = os.fspath(checkpoint_dir)
    metadata = read_dcp_metadata_safely(folder, trust_pickles=trust_pickles, opt_in=opt_in)
    try:
        dcp.load(
            state_dict,
            storage_reader=_safe_reader(folder, metadata, trust_pickles, opt_in),
            planner=_safe_planner(folder, trust_pickles, opt_in),
            no_dist=no_dist,
        )
    except CheckpointException as exc:
        for failure in exc.failures.values():
            refused = failure[0] if isinstance(failure, tuple) else failure
            if isinstance(refused, UntrustedPickleError):
                raise UntrustedPickleError(
                    str(refused), refused.path, refused.refused_global
                ) from None
        raise

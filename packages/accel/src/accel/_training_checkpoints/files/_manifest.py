"""The manifest of a checkpoint (``accel_checkpoint.json``) and the checks made against it.

The manifest lists every file ``save_state`` wrote, with its size and a CRC-32 checksum
(``"crc32:<8 hex digits>"``), the format version, the world size and step of the saving run, and
counts of the saved objects. It is written last, so a folder with a manifest is complete; files
of the folder that the manifest does not list were not written by accel (a user's notes, eval
results) and are never read, checked nor deleted by it.

safetensors files have no checksum of their own: a data section damaged after writing (a bad
disk, a truncated copy patched back to size) would load silently. The manifest's checksum is
what catches it; a load verifies it before anything changes (opt out with
``load_state(..., verify_checksums=False)``).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._crc import crc32_of_file

MANIFEST_NAME = "accel_checkpoint.json"
FORMAT_VERSION = 1
CHECKSUM_ALGORITHM = "crc32"
_KNOWN = ("format_version", "world_size", "step", "files", "checksums")


class CheckpointIntegrityError(ValueError):
    """A checkpoint's manifest cannot be read, or one of its files differs from what
    ``save_state`` wrote (missing, other size, other checksum)."""


@dataclass
class Manifest:
    """What a complete checkpoint holds."""

    format_version: int
    """Version of the layout; a reader refuses versions newer than its own."""
    world_size: int
    """Number of processes of the saving run (one random-state file each)."""
    step: int
    """``Accelerator.step`` of the saving run."""
    files: dict[str, int] = field(default_factory=dict)
    """Relative path -> size in bytes, for every file of the checkpoint."""
    checksums: dict[str, str] = field(default_factory=dict)
    """Relative path -> ``"crc32:<hex>"``; empty for checkpoints of older accel versions."""
    extra: dict[str, Any] = field(default_factory=dict)
    """Counts of saved objects (models, optimizers ...) and the serialization used."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "format_version": self.format_version,
                "world_size": self.world_size,
                "step": self.step,
                "files": self.files,
                "checksums": self.checksums,
                **self.extra,
            },
            indent=1,
            sort_keys=True,
        )


# --------------------------------------------------------------------------- checksums
CHECKSUM_ALGORITHMS = {"crc32": 8, "sha256": 64, "blake2b": 128}
"""The checksums a manifest may record, with the hex digits of each. CRC-32 (the default)
catches disk and copy errors; the two cryptographic hashes also resist a file forged to match,
when the manifest itself is pinned ([`checkpoint_digest`][accel.utils.checkpoint_digest])."""


def file_checksum(path: str, algorithm: str = CHECKSUM_ALGORITHM) -> str:
    """``"<algorithm>:<hex digest>"`` of a file.

    CRC-32 is computed through a memory map on every core; SHA-256 and BLAKE2b on one
    thread, a window of the map at a time (they cannot be split into parts).
    """
    if algorithm == CHECKSUM_ALGORITHM:
        return f"{CHECKSUM_ALGORITHM}:{crc32_of_file(path):08x}"
    hasher = _hasher(algorithm)
    with open(path, "rb") as handle:
        size = os.fstat(handle.fileno()).st_size
        position = 0
        while position < size:
            length = min(_HASH_WINDOW, size - position)
            with mmap.mmap(
                handle.fileno(), length, access=mmap.ACCESS_READ, offset=position
            ) as mapped:
                hasher.update(mapped)
            position += length
    return f"{algorithm}:{hasher.hexdigest()}"


_HASH_WINDOW = 64 << 20


class _Hasher(Protocol):
    """What a checksum needs of a ``hashlib`` object."""

    def update(self, data: bytes | memoryview | mmap.mmap, /) -> None: ...

    def hexdigest(self) -> str: ...


def _hasher(algorithm: str) -> _Hasher:
    if algorithm == "sha256":
        return hashlib.sha256()
    if algorithm == "blake2b":
        return hashlib.blake2b()
    raise ValueError(
        f"a checkpoint checksum is one of {sorted(CHECKSUM_ALGORITHMS)}; got {algorithm!r}. "
        "Pass checksum='sha256' (or 'blake2b') for a hash that resists forgery, or leave the "
        "default CRC-32."
    )


def check_algorithm(algorithm: str) -> str:
    """``algorithm`` if a manifest can record it, else a ``ValueError`` naming the choices."""
    if algorithm not in CHECKSUM_ALGORITHMS:
        _hasher(algorithm)
    return algorithm


def checkpoint_digest(input_dir: str) -> str:
    """``"sha256:<hex>"`` of a checkpoint's manifest: keep it where only you can write, and
    ``load_state(..., expected_digest=...)`` refuses a checkpoint whose manifest (and so, when
    it records SHA-256 or BLAKE2b checksums, any of its files) was changed since."""
    path = os.path.join(input_dir, MANIFEST_NAME)
    with open(path, "rb") as handle:
        return "sha256:" + hashlib.sha256(handle.read()).hexdigest()


def check_digest(input_dir: str, manifest: Manifest, expected: str) -> None:
    """Refuse a checkpoint whose manifest does not have the pinned digest ``expected``, or
    whose files are not all covered by a cryptographic hash.

    Raises:
        CheckpointIntegrityError: naming what differs.
    """
    found = checkpoint_digest(input_dir)
    if found != expected:
        raise CheckpointIntegrityError(
            f"a pinned checkpoint must have the manifest digest recorded when it was saved; "
            f"{input_dir!r} has {found}, expected {expected}. The checkpoint was changed after "
            "it was saved: load a copy you trust."
        )
    weak = sorted(
        n
        for n in manifest.files
        if manifest.checksums.get(n, "").split(":")[0] not in ("sha256", "blake2b")
    )
    if weak:
        raise CheckpointIntegrityError(
            "a pinned digest protects a checkpoint only when every file has a cryptographic "
            f"checksum; {input_dir!r} records CRC-32 (or none) for {weak[:5]}, which a forger "
            "can match. Save it with save_state(..., checksum='sha256') and pin that one."
        )


# --------------------------------------------------------------------------- reading
def read_manifest(input_dir: str) -> Manifest:
    """Read and check the manifest of ``input_dir``.

    Raises:
        FileNotFoundError: when the folder is missing or has no manifest (incomplete).
        CheckpointIntegrityError: when the manifest is not valid JSON of the expected shape,
            or was written by a newer format.
    """
    if not os.path.isdir(input_dir):
        raise FileNotFoundError(
            f"load_state needs an existing checkpoint folder; {input_dir!r} does not exist. "
            "Pass the folder save_state wrote (or no argument with automatic_checkpoint_naming)."
        )
    path = os.path.join(input_dir, MANIFEST_NAME)
    if not os.path.isfile(path):
        parent, name = os.path.split(os.path.abspath(input_dir))
        partial = os.path.isdir(os.path.join(parent, f".{name}.partial"))
        hint = " (a save into it was interrupted)" if partial else ""
        raise FileNotFoundError(
            f"a checkpoint is complete only once save_state has written its {MANIFEST_NAME}; "
            f"{input_dir!r} has none{hint}, so it is incomplete or was not written by "
            "save_state. Load an earlier checkpoint."
        )
    with open(path, "rb") as handle:
        raw = handle.read()
    return parse_manifest(raw, path)


def parse_manifest(raw: bytes | str, where: str) -> Manifest:
    """Build a `Manifest` from the bytes of ``accel_checkpoint.json``.

    Raises:
        CheckpointIntegrityError: naming what is wrong, for anything but a valid manifest.
    """
    try:
        data = json.loads(raw)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _invalid(where, f"it is not JSON ({type(exc).__name__}: {str(exc)[:80]})") from None
    if not isinstance(data, dict):
        raise _invalid(where, f"it holds a JSON {type(data).__name__}, not an object")
    version = _integer(data, "format_version", where, default=0)
    if version > FORMAT_VERSION:
        raise CheckpointIntegrityError(
            f"this version of accel reads checkpoint format {FORMAT_VERSION} and older; "
            f"{where!r} has format {version}. Upgrade accel to load it."
        )
    world_size = _integer(data, "world_size", where)
    if world_size < 1:
        raise _invalid(where, f"'world_size' is {world_size}, not a positive integer")
    files = _mapping(data, "files", where)
    sizes: dict[str, int] = {}
    for name, size in files.items():
        if type(size) is not int or size < 0:
            raise _invalid(where, f"the size of file {name!r} is {size!r}, not a byte count")
        _check_relative(name, where)
        sizes[name] = size
    _check_world_size(world_size, sizes, where)
    checksums: dict[str, str] = {}
    for name, value in _mapping(data, "checksums", where).items():
        if name not in sizes or not _is_checksum(value):
            raise _invalid(
                where,
                f"checksum entry {name!r}: {value!r} is not '<algorithm>:<hex digest>' "
                f"({', '.join(sorted(CHECKSUM_ALGORITHMS))}) of a listed file",
            )
        checksums[name] = value
    return Manifest(
        format_version=version,
        world_size=world_size,
        step=_integer(data, "step", where, default=0),
        files=sizes,
        checksums=checksums,
        extra={k: v for k, v in data.items() if k not in _KNOWN},
    )


_RANDOM_STATES = re.compile(r"^random_states_(\d+)\.pkl$")
"""The file each process writes its random states to (``_state_files.RNG_STATE_NAME``)."""


def _check_world_size(world_size: int, files: dict[str, int], where: str) -> None:
    """Every process of the saving run wrote its random states: the ranks listed must be
    exactly ``0 .. world_size - 1`` (a count nothing else backs is not trusted)."""
    ranks = sorted(int(m.group(1)) for m in map(_RANDOM_STATES.match, files) if m)
    if ranks != list(range(len(ranks))) or len(ranks) != world_size:
        shown = ranks if len(ranks) <= 8 else [*ranks[:8], "..."]
        raise _invalid(
            where,
            f"'world_size' is {world_size} but the files list the random states of processes "
            f"{shown} (each process of the saving run writes one)",
        )


def saved_count(manifest: Manifest, kind: str, where: str) -> int | None:
    """The number of ``kind`` objects (``"models"``, ``"optimizers"`` ...) the manifest records.

    Raises:
        CheckpointIntegrityError: when the entry is not a non-negative integer.
    """
    value = manifest.extra.get(kind)
    if value is None:
        return None
    if type(value) is not int or value < 0:
        raise _invalid(where, f"{kind!r} is {value!r}, not a count of objects")
    return value


def _integer(data: dict[str, Any], key: str, where: str, default: int | None = None) -> int:
    if key not in data and default is not None:
        return default
    value = data.get(key)
    if type(value) is not int:
        raise _invalid(where, f"{key!r} is {value!r}, not an integer")
    return value


def _mapping(data: dict[str, Any], key: str, where: str) -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise _invalid(where, f"{key!r} is a {type(value).__name__}, not an object")
    return value


def _check_relative(name: str, where: str) -> None:
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or any(p in ("", ".", "..") for p in parts):
        raise _invalid(where, f"file name {name!r} is not a plain path inside the checkpoint")
    if name == MANIFEST_NAME:
        raise _invalid(where, f"it lists itself ({name!r}) as a checkpoint file")


def _is_checksum(value: object) -> bool:
    if not isinstance(value, str) or ":" not in value:
        return False
    algorithm, digits = value.split(":", 1)
    width = CHECKSUM_ALGORITHMS.get(algorithm)
    return len(digits) == width and all(c in "0123456789abcdef" for c in digits)


def _invalid(where: str, rule: str) -> CheckpointIntegrityError:
    return CheckpointIntegrityError(
        f"a checkpoint manifest must be the JSON object save_state writes (format_version, "
        f"world_size, step, files, checksums); {where!r} is not: {rule}. The checkpoint was "
        "damaged or edited after it was written: load an earlier one."
    )


# --------------------------------------------------------------------------- files
def verify_file(input_dir: str, manifest: Manifest, name: str, checksum: bool = True) -> str:
    """Path of ``name`` in the checkpoint after checking its size (and checksum) against the
    manifest.

    Raises:
        CheckpointIntegrityError: when ``name`` is not listed, is missing, or differs.
    """
    path = os.path.join(input_dir, name)
    expected = manifest.files.get(name)
    if expected is None:
        raise CheckpointIntegrityError(
            f"every file load_state reads must be listed in the checkpoint manifest; {name!r} "
            f"is not listed in {input_dir!r}. The checkpoint was saved with fewer objects than "
            "this run prepared: prepare the same objects as the saving run."
        )
    actual = os.path.getsize(path) if os.path.isfile(path) else None
    if actual != expected:
        state = "is missing" if actual is None else f"has {actual} bytes"
        raise CheckpointIntegrityError(
            f"a checkpoint file must have the size recorded in its manifest; {name!r} in "
            f"{input_dir!r} {state}, the manifest says {expected}. The checkpoint was damaged "
            "after it was written: load an earlier one."
        )
    recorded = manifest.checksums.get(name)
    if checksum and recorded is not None:
        found = file_checksum(path, recorded.split(":", 1)[0])
        if found != recorded:
            raise CheckpointIntegrityError(
                f"a checkpoint file must have the checksum recorded in its manifest; {name!r} "
                f"in {input_dir!r} has {found}, the manifest says {recorded}. Its content was "
                "damaged after it was written (disk or copy error): load an earlier checkpoint, "
                "or pass load_state(..., verify_checksums=False) only if you know the file is "
                "right."
            )
    return path

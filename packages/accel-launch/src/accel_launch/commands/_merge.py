"""``accel merge-weights``: a sharded ``torch.distributed.checkpoint`` folder -> safetensors.

Weights are read shard by shard through the checkpoint's metadata, so the merge holds at most
one output shard in memory, never the whole model.
"""

from __future__ import annotations

import contextlib
import errno
import json
import math
import os
import shutil
import warnings
from collections.abc import Iterator
from contextvars import ContextVar
from pathlib import Path
from typing import Any, TextIO

from .._errors import ConfigError
from ._status import ByteProgress, size_text

MODEL_PREFIX = "model."
READ_GROUP = 1 << 30
"""Bytes of tensors read at once within one output file (the unit of its progress)."""
_REPORT: ContextVar[TextIO | None] = ContextVar("merge_report", default=None)
TRUST_FLAG = "--trust_pickles (merge_weights(..., trust_pickles=True))"


def _plan_shards(sizes: dict[str, int], limit: int) -> list[list[str]]:
    shards: list[list[str]] = [[]]
    current = 0
    for name, size in sizes.items():
        if shards[-1] and current + size > limit:
            shards.append([])
            current = 0
        shards[-1].append(name)
        current += size
    return shards


_SIZE_RULE = (
    "A size must be digits followed by a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB); got "
    "{size!r}. Write it like '5GB' or '10GiB', or pass an int number of bytes."
)


def _size_of_text(text: str) -> int | None:
    """Bytes of ``"5GB"``-like text as ``accel_bigmodel.convert_file_size_to_int`` reads it
    (its module imports no torch); -1 for a negative size, None when it does not parse."""
    from accel_bigmodel import convert_file_size_to_int

    try:
        return convert_file_size_to_int(text)
    except ValueError as exc:
        return -1 if "non-negative" in str(exc) else None


def shard_size_bytes(value: int | float | str) -> int:
    """``max_shard_size`` in bytes (``"5GB"``, ``"500MiB"`` or a number of bytes), > 0.

    Torch is not imported: ``accel merge-weights`` checks its arguments before any work.

    Raises:
        ConfigError: for a size that does not parse or is not positive.
    """
    if isinstance(value, float) and value.is_integer() and value >= 0:
        value = int(value)  # 5e9
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise ConfigError(
            f"max_shard_size must be an int number of bytes or a string like '5GB'; got "
            f"{type(value).__name__} {value!r}. Write it like '5GB'."
        )
    limit = value if isinstance(value, int) else _size_of_text(value)
    if limit is None:
        raise ConfigError(f"max_shard_size: {_SIZE_RULE.format(size=value)}")
    if limit < 1:
        raise ConfigError(
            f"max_shard_size is the largest output file and must be > 0 bytes; got {value!r}. "
            "Write it like '5GB'."
        )
    return limit


MERGED_NAMES = ("model.safetensors", "model.safetensors.index.json")
"""Files a merge writes whatever the shard count (accel_bigmodel's ``SAFE_WEIGHTS_NAME`` and
``SAFE_WEIGHTS_INDEX_NAME``, named here so the check imports no torch)."""


def check_merge_arguments(
    checkpoint_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    max_shard_size: int | str,
    remove_checkpoint_dir: bool = False,
) -> tuple[Path, Path, int]:
    """Check a merge's arguments, without importing torch: the checkpoint folder holds
    ``.metadata``, the output path can be a folder that holds no merged weights yet (and lies
    outside the checkpoint folder when that is to be removed), and the shard size parses.

    Returns:
        The checkpoint folder, the output folder and the shard size in bytes.

    Raises:
        ConfigError: naming the argument at fault, its value and the fix.
    """
    limit = shard_size_bytes(max_shard_size)
    target = check_output_folder(output_dir)
    source = Path(checkpoint_dir)
    inside = Path(output_dir).resolve()
    if remove_checkpoint_dir and source.resolve() in (inside, *inside.parents):
        raise ConfigError(
            "remove_checkpoint_dir deletes the checkpoint folder, but the output "
            f"{str(output_dir)!r} is inside it (or is it) and would be deleted too. Write the "
            "merged weights outside the checkpoint folder."
        )
    for name in MERGED_NAMES:
        if (target / name).exists():
            raise ConfigError(
                f"merge-weights does not overwrite merged weights; {str(target / name)!r} exists. "
                "Pick an empty output folder or delete the old files."
            )
    if not (source / ".metadata").is_file():
        raise ConfigError(
            f"merge-weights reads a torch.distributed.checkpoint folder, which holds a "
            f"`.metadata` file; {str(source)!r} has none. Pass the folder the sharded "
            "checkpoint was saved to (e.g. .../pytorch_model_fsdp_0)."
        )
    return source, target, limit


def check_output_folder(output_dir: str | os.PathLike[str]) -> Path:
    """The output folder of a merge: a folder, or a path where one can be created.

    Raises:
        ConfigError: when the path (or one of its parents) is an existing file.
    """
    target = Path(output_dir)
    for path in (target, *target.parents):
        if path.exists() and not path.is_dir():
            raise ConfigError(
                f"merge-weights writes into a folder, but {str(path)!r} is an existing file; got "
                f"output path {str(target)!r}. Pass a folder path (created when missing), or move "
                "the file away."
            )
    return target


@contextlib.contextmanager
def reporting(stream: TextIO) -> Iterator[None]:
    """Within the block, merges print to ``stream`` what they read and write, one line per
    file written, and a progress line on a terminal (``accel merge-weights`` uses stderr)."""
    token = _REPORT.set(stream)
    try:
        yield
    finally:
        _REPORT.reset(token)


def _user_mode() -> int:
    """Mode of a new regular file under this process's umask (0o644 under umask 022)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return 0o666 & ~int(line.split()[1], 8)
    except OSError:  # not Linux: read the umask by setting it back at once
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return 0o666 & ~mask


def merge_weights(
    checkpoint_dir: str | os.PathLike[str],
    output_dir: str | os.PathLike[str],
    max_shard_size: int | str = "10GB",
    *,
    trust_pickles: bool = False,
) -> list[Path]:
    """Merge a distributed checkpoint (as FSDP or ``torch.distributed.checkpoint.save`` writes
    it) into ``model.safetensors``, or into numbered shards with ``model.safetensors.index.json``
    when the weights exceed ``max_shard_size``.

    When the checkpoint holds a ``model`` entry next to others (optimizer ...), only the model's
    tensors are kept and their ``model.`` prefix is dropped. Non-tensor entries are skipped.

    Args:
        checkpoint_dir: The folder holding ``.metadata`` and the ``*.distcp`` files.
        output_dir: Where to write (created; must not already hold merged weights).
        max_shard_size: Largest size of one output file (``"5GB"``, ``"500MiB"`` or bytes).
        trust_pickles: Unpickle the checkpoint's ``.metadata`` and non-tensor entries with no
            restriction (``--trust_pickles``); without it they are read by a restricted
            reader and a file naming any other global is refused without running it.

    Returns:
        The files written.

    Raises:
        ConfigError: for a folder that is not a distributed checkpoint, an output path that is a
            file or a folder that already holds weights, a shard size that does not parse, or a
            checkpoint without tensors. All are checked before anything is read or written.
        OSError: when a file cannot be written (a full disk names the file, the folder and the
            free space); what the merge wrote is removed first.
        accel_bigmodel.UntrustedPickleError: for a file that would run code when read.
    """
    source, target, limit = check_merge_arguments(checkpoint_dir, output_dir, max_shard_size)
    import torch
    from accel_bigmodel import (
        SAFE_WEIGHTS_INDEX_NAME,
        SAFE_WEIGHTS_NAME,
        read_dcp_metadata_safely,
        write_safetensors,
    )
    from torch.distributed.checkpoint.metadata import TensorStorageMetadata

    metadata = read_dcp_metadata_safely(source, trust_pickles=trust_pickles, opt_in=TRUST_FLAG)
    entries: dict[str, Any] = {
        key: meta
        for key, meta in metadata.state_dict_metadata.items()
        if isinstance(meta, TensorStorageMetadata)
    }
    if any(key.startswith(MODEL_PREFIX) for key in entries):
        entries = {k: v for k, v in entries.items() if k.startswith(MODEL_PREFIX)}
        rename = {k: k[len(MODEL_PREFIX) :] for k in entries}
    else:
        rename = {k: k for k in entries}
    if not entries:
        raise ConfigError(
            f"merge-weights found no tensor in {str(source)!r} (its entries: "
            f"{sorted(metadata.state_dict_metadata)[:10]}). Pass a checkpoint of model weights."
        )
    sizes = {
        key: int(torch.Size(meta.size).numel())
        * torch.empty((), dtype=meta.properties.dtype).element_size()
        for key, meta in entries.items()
    }
    check_shapes_fit(source, metadata, sizes)
    shards = _plan_shards(sizes, limit)
    created = not target.exists()
    target.mkdir(parents=True, exist_ok=True)
    written: list[Path] = []
    weight_map: dict[str, str] = {}
    name = SAFE_WEIGHTS_NAME
    report = _REPORT.get()
    if report is not None:
        files = {str(info.relative_path) for info in metadata.storage_data.values()}
        print(
            f"accel merge-weights: reading {source} ({len(entries)} tensors, "
            f"{size_text(sum(sizes.values()))} in {len(files)} files) into {len(shards)} "
            f"safetensors file(s) in {target}",
            file=report,
            flush=True,
        )
    try:
        for index, keys in enumerate(shards, 1):
            if len(shards) == 1:
                name = SAFE_WEIGHTS_NAME
            else:
                stem, suffix = SAFE_WEIGHTS_NAME.rsplit(".", 1)
                name = f"{stem}-{index:05d}-of-{len(shards):05d}.{suffix}"
            step = f"accel merge-weights: [{index}/{len(shards)}] {name}"
            bar = ByteProgress(step, sum(sizes[k] for k in keys), report) if report else None
            state: dict[str, Any] = {}
            # Read in groups of about READ_GROUP bytes, so a long shard shows its progress.
            for group in _plan_shards({k: sizes[k] for k in keys}, READ_GROUP):
                part = {
                    key: torch.empty(tuple(entries[key].size), dtype=entries[key].properties.dtype)
                    for key in group
                }
                _read_tensors(part, source, trust_pickles)
                state.update(part)
                if bar is not None:
                    bar.update(sum(sizes[k] for k in group))
            tensors = {rename[k]: v.contiguous() for k, v in state.items()}
            # accel-bigmodel's writer streams tensor by tensor and needs no numpy (safetensors'
            # save_file converts every tensor through numpy, which this package does not declare).
            write_safetensors(target / name, tensors, metadata={"format": "pt"})
            os.chmod(
                target / name, _user_mode()
            )  # the usual mode of a new file, whatever the writer
            weight_map.update(dict.fromkeys(tensors, name))
            written.append(target / name)
            if bar is not None and report is not None:
                bar.close()
                done = sum(sizes[k] for k in keys)
                print(f"{step}: read and wrote {size_text(done)}", file=report, flush=True)
            del state, tensors
        if len(shards) > 1:
            index_path = target / SAFE_WEIGHTS_INDEX_NAME
            name = index_path.name
            written.append(index_path)  # removed with the shards if it cannot be written
            index_path.write_text(
                json.dumps(
                    {"metadata": {"total_size": sum(sizes.values())}, "weight_map": weight_map},
                    indent=2,
                    sort_keys=True,
                )
            )
    except OSError as err:
        raise _failed_write(err, target, name, written, created) from None
    return written


def check_shapes_fit(source: Path, metadata: Any, sizes: dict[str, int]) -> None:
    """Refuse a tensor whose shape in ``.metadata`` needs more bytes than the checkpoint's files
    hold for it, before any tensor is allocated (a tampered shape would ask for terabytes).

    Args:
        source: The checkpoint folder.
        metadata: Its ``.metadata`` (a ``torch.distributed.checkpoint`` ``Metadata``).
        sizes: Bytes of each tensor the merge will read, from its shape and dtype.

    Raises:
        ConfigError: naming the tensor, its shape, the bytes it needs and the bytes stored.
    """
    stored: dict[str, int] = dict.fromkeys(sizes, 0)
    transformed: set[str] = set()
    files: dict[str, int] = {}
    for index, info in metadata.storage_data.items():
        if index.fqn not in stored:
            continue
        name = str(info.relative_path)
        if name not in files:
            path = source / name
            inside = Path(name).name == name and path.is_file()
            files[name] = path.stat().st_size if inside else 0
        if 0 <= info.offset and info.offset + info.length <= files[name]:
            stored[index.fqn] += info.length
        if getattr(info, "transform_descriptors", None):
            transformed.add(index.fqn)  # compressed: its bytes may be fewer than the tensor's
    for key, size in sizes.items():
        meta = metadata.state_dict_metadata[key]
        covered = sum(math.prod(chunk.sizes) for chunk in meta.chunks)
        if covered == math.prod(meta.size) and (key in transformed or size <= stored[key]):
            continue
        raise ConfigError(
            f"merge-weights: the checkpoint {str(source)!r} is inconsistent: its .metadata gives "
            f"tensor {key!r} the shape {list(meta.size)} ({size} bytes), but its chunks cover "
            f"{covered} of {math.prod(meta.size)} elements and its files hold {stored[key]} "
            "bytes for it. The .metadata was changed or belongs to other files: save the "
            "checkpoint again."
        )


def _read_tensors(state: dict[str, Any], source: Path, trust_pickles: bool) -> None:
    """Fill ``state`` from the checkpoint; a shard file that cannot be read (damaged bytes, a
    truncated pickle) is a ConfigError naming the checkpoint and the first cause."""
    from accel_bigmodel import UntrustedPickleError, safe_dcp_load

    try:
        with warnings.catch_warnings():  # "assuming the intent is to load in a single process"
            warnings.filterwarnings("ignore", "torch.distributed is disabled", UserWarning)
            safe_dcp_load(
                state, source, no_dist=True, trust_pickles=trust_pickles, opt_in=TRUST_FLAG
            )
    except (ConfigError, UntrustedPickleError, OSError, KeyboardInterrupt, SystemExit):
        raise
    except BaseException as err:  # torch's CheckpointException is not an Exception
        failures = getattr(err, "failures", None)  # one (exception, trace) per rank
        cause = next(iter(failures.values()))[0] if isinstance(failures, dict) and failures else err
        first = (str(cause).strip().splitlines() or [type(cause).__name__])[0]
        raise ConfigError(
            f"merge-weights could not read the tensors of the checkpoint {str(source)!r}: "
            f"{type(cause).__name__}: {first} Its shard files are damaged or incomplete: save "
            "the checkpoint again, or copy it again from its source."
        ) from None


_STORAGE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS}
"""Errors of the storage itself (a full disk, a quota, a read-only file system)."""


def _failed_write(
    err: OSError, target: Path, name: str, written: list[Path], created: bool
) -> OSError:
    """Remove what a failed merge wrote (its files, the temporary file of the one in flight,
    the output folder when the merge created it) and return the error to raise: for a storage
    error one that names the file, the folder, the free space and the fix."""
    for path in [*written, target / f"{name}.tmp"]:
        with contextlib.suppress(OSError):
            path.unlink(missing_ok=True)
    if created:
        with contextlib.suppress(OSError):
            target.rmdir()  # only when empty: nothing of the user's is removed
    if err.errno not in _STORAGE_ERRORS:
        return err
    try:
        space = f" ({shutil.disk_usage(target.parent if created else target).free} bytes free)"
    except OSError:
        space = ""
    fix = "Free space on that disk" if err.errno == errno.ENOSPC else "Fix the storage"
    return OSError(
        err.errno,
        f"merge-weights could not write {name!r} into {str(target)!r}{space}: "
        f"{err.strerror or err}. What this merge wrote was removed. {fix}, or pass another "
        "output folder.",
        str(target / name),
    )


def merge_fsdp_weights(
    checkpoint_dir: str | os.PathLike[str],
    output_path: str | os.PathLike[str],
    safe_serialization: bool = True,
    remove_checkpoint_dir: bool = False,
    *,
    max_shard_size: int | str = "10GB",
    trust_pickles: bool = False,
) -> list[Path]:
    """Merge the sharded FSDP checkpoint in ``checkpoint_dir`` (a ``pytorch_model_fsdp_<i>``
    folder that ``save_state`` / ``save_fsdp_model`` wrote with ``SHARDED_STATE_DICT``) into
    safetensors in ``output_path``; see ``merge_weights``. Under several processes only the main
    one merges, and the others wait for it.

    Args:
        checkpoint_dir: The folder holding ``.metadata`` and the ``*.distcp`` files.
        output_path: The output folder (created).
        safe_serialization: Must be True: accel writes safetensors only, because a pickled
            ``.bin`` file runs code when it is loaded.
        remove_checkpoint_dir: Delete ``checkpoint_dir`` once merged.
        max_shard_size: Largest size of one output file.
        trust_pickles: See ``merge_weights``.

    Returns:
        The files written (empty on processes other than the main one).

    Raises:
        ConfigError: for ``safe_serialization=False``, an output inside the checkpoint folder
            that ``remove_checkpoint_dir`` would delete, and every error of ``merge_weights``.
    """
    if not safe_serialization:
        raise ConfigError(
            "merge_fsdp_weights writes safetensors only, because a pickled .bin file runs code "
            "when it is loaded; got safe_serialization=False. Drop it: transformers and accel "
            "load model.safetensors directly."
        )
    import torch.distributed as dist

    distributed = dist.is_available() and dist.is_initialized()
    if not distributed:
        check_merge_arguments(checkpoint_dir, output_path, max_shard_size, remove_checkpoint_dir)
    else:
        # Only the main process writes, so only it checks: another process checking on its own
        # could see the main process's fresh output and refuse it. Every process then raises
        # the main process's error, so none waits at the barrier below for one that stopped.
        refusal: list[str | None] = [None]
        if dist.get_rank() == 0:
            try:
                check_merge_arguments(
                    checkpoint_dir, output_path, max_shard_size, remove_checkpoint_dir
                )
            except ConfigError as error:
                refusal = [str(error)]
        dist.broadcast_object_list(refusal, src=0)
        if refusal[0] is not None:
            raise ConfigError(refusal[0])
    written: list[Path] = []
    if not distributed or dist.get_rank() == 0:
        written = merge_weights(
            checkpoint_dir, output_path, max_shard_size, trust_pickles=trust_pickles
        )
        if remove_checkpoint_dir:
            shutil.rmtree(checkpoint_dir)
    if distributed:
        dist.barrier()
    return written

"""Weights in and out of existing tensors: tied-storage detection, a threaded in-place
safetensors reader and a writer that stores tied tensors once.

The reader fills the tensors a model already has, so loading holds no second copy of the
weights: each tensor's bytes go from the file (page cache or disk) straight into its memory,
split into chunks that several threads read at once (``preadv`` releases the GIL, so the copies
run on every core). The writer records which names alias another under the
[`TIED_ALIASES_KEY`][accel_bigmodel.TIED_ALIASES_KEY] metadata entry, and the reader fills those names through the stored one.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Union

import torch
from torch import nn

from ..files._safetensors_io import (
    CorruptSafetensorsError,
    SafetensorsFile,
    read_span,
    write_safetensors,
)

PathLike = Union[str, "os.PathLike[str]"]

TIED_ALIASES_KEY = "accel_tied_aliases"
"""Metadata entry of a safetensors file: JSON map of each alias name to the stored name."""

CHUNK_BYTES = 16 * 1024 * 1024
"""Bytes one reader thread copies at a time (big tensors are split into such chunks)."""


class CheckpointKeysError(ValueError):
    """The checkpoint's tensors do not match the model's in a way the load cannot accept.

    Raised before any weight is placed (the model is left as it was) when ``strict=True`` and
    keys differ, or when tensors the checkpoint lacks are on the ``meta`` device (they would
    have no values).

    Attributes:
        missing_keys: Model tensors the checkpoint does not hold.
        unexpected_keys: Checkpoint tensors the model does not have.
        files: The checkpoint files that were read.
    """

    def __init__(
        self,
        message: str,
        missing_keys: list[str],
        unexpected_keys: list[str],
        files: list[str],
    ) -> None:
        super().__init__(message)
        self.missing_keys = missing_keys
        self.unexpected_keys = unexpected_keys
        self.files = files


def default_threads() -> int:
    """Reader threads used when none are given: the CPUs this process may use, at most 4."""
    try:
        available = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        available = os.cpu_count() or 1
    return max(1, min(4, available))


# --------------------------------------------------------------------------- tied storage
def tensor_view_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    """What makes two tensors the same view of the same memory (tied weights).

    Two tensors with equal keys read and write the same bytes: same device, storage address,
    offset, shape, stride and dtype.
    """
    return (
        tensor.device,
        tensor.untyped_storage().data_ptr(),
        tensor.storage_offset(),
        tuple(tensor.shape),
        tuple(tensor.stride()),
        tensor.dtype,
    )


def _storage_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    storage = tensor.untyped_storage()
    return tensor.device, storage.data_ptr(), storage.nbytes()


def find_tied_storages(state_dict: Mapping[str, Any], *, same_view: bool = True) -> dict[str, str]:
    """Map each name whose tensor shares memory with an earlier name to that earlier name.

    Args:
        state_dict: Names to tensors (other values and meta tensors are ignored).
        same_view: Count two names as tied only when they are the same view of the memory
            ([`tensor_view_key`][accel_bigmodel.tensor_view_key]); ``False`` ties any two tensors on one storage, even
            different slices of it (what a format that stores each storage once needs).

    Returns:
        ``{alias: first_name}`` in the state dict's order; names tied to nothing are absent.

    Example:
        >>> weight = torch.zeros(2, 2)
        >>> find_tied_storages({"embed.weight": weight, "head.weight": weight})
        {'head.weight': 'embed.weight'}
    """
    key = tensor_view_key if same_view else _storage_key
    seen: dict[tuple[Any, ...], str] = {}
    aliases: dict[str, str] = {}
    for name, tensor in state_dict.items():
        if not isinstance(tensor, torch.Tensor) or tensor.device.type == "meta":
            continue
        found = seen.setdefault(key(tensor), name)
        if found != name:
            aliases[name] = found
    return aliases


def read_tied_aliases(file: SafetensorsFile) -> dict[str, str]:
    """The ``{alias: stored_name}`` map a file written by [`save_safetensors_file`][accel_bigmodel.save_safetensors_file] holds
    (empty for other files).

    Raises:
        CorruptSafetensorsError: when the entry is not a JSON map of names to names.
    """
    raw = file.metadata.get(TIED_ALIASES_KEY, "{}")
    try:
        aliases = json.loads(raw)
    except ValueError:
        aliases = None
    if not isinstance(aliases, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in aliases.items()
    ):
        raise CorruptSafetensorsError(
            f"the {TIED_ALIASES_KEY!r} metadata of a weights file maps names to names; "
            f"{os.path.basename(file.path)} holds {raw[:80]!r}. The file was damaged or not "
            "written by save_safetensors_file: load an earlier copy or re-save it."
        )
    return aliases


# --------------------------------------------------------------------------- writing
def save_safetensors_file(
    path: PathLike,
    state_dict: Mapping[str, Any],
    *,
    metadata: Mapping[str, str] | None = None,
    durable: bool = True,
) -> dict[str, str]:
    """Write a state dict to one safetensors file, each tied tensor once.

    Names that alias an earlier name ([`find_tied_storages`][accel_bigmodel.find_tied_storages]) are not stored; the map is
    recorded under [`TIED_ALIASES_KEY`][accel_bigmodel.TIED_ALIASES_KEY] so [`load_safetensors_into`][accel_bigmodel.load_safetensors_into] fills them again.
    Tensors are written one at a time from their own memory (no copy of the set).

    Args:
        path: Destination (written under a temporary name, then renamed).
        state_dict: Names to tensors.
        metadata: More string metadata for the header (``format`` defaults to ``"pt"``).
        durable: Flush the file to stable storage before the rename, so a crash leaves either
            the previous file or the complete new one.

    Returns:
        The ``{alias: stored_name}`` map recorded.

    Raises:
        TypeError: when a value is not a tensor (safetensors stores tensors only).
    """
    others = sorted(k for k, v in state_dict.items() if not isinstance(v, torch.Tensor))
    if others:
        raise TypeError(
            f"safetensors stores tensors only; the state dict holds non-tensor entries {others}. "
            "Drop them, or save this state dict with torch.save (safe_serialization=False)."
        )
    aliases = find_tied_storages(state_dict)
    unique = {k: v for k, v in state_dict.items() if k not in aliases}
    header = {"format": "pt", **(metadata or {}), TIED_ALIASES_KEY: json.dumps(aliases)}
    write_safetensors(path, unique, metadata=header, durable=durable)
    return aliases


# --------------------------------------------------------------------------- reading
def supports_in_place_load(module: nn.Module) -> bool:
    """Whether [`load_safetensors_into`][accel_bigmodel.load_safetensors_into] gives ``module`` what ``load_state_dict`` would.

    True when no submodule overrides ``_load_from_state_dict`` or ``set_extra_state`` and no
    state-dict or load hook is registered: then loading is copying each stored tensor into the
    tensor of the same name.
    """
    base = nn.Module._load_from_state_dict
    for sub in module.modules():
        if type(sub)._load_from_state_dict is not base:
            return False
        if sub._load_state_dict_pre_hooks or sub._load_state_dict_post_hooks:
            return False
        if type(sub).set_extra_state is not nn.Module.set_extra_state:
            return False
    return not module._state_dict_pre_hooks and not getattr(module, "_state_dict_hooks", None)


def _targets(target: Union[nn.Module, Mapping[str, Any]]) -> dict[str, torch.Tensor]:
    if isinstance(target, nn.Module):
        if not supports_in_place_load(target):
            raise TypeError(
                f"load_safetensors_into copies tensors in place, which skips the custom loading "
                f"code of {type(target).__name__} (an overridden _load_from_state_dict or "
                "set_extra_state, or a state-dict hook); such a module must load through "
                "module.load_state_dict(...). Check supports_in_place_load(module) first."
            )
        return dict(target.state_dict(keep_vars=True))
    wrong = sorted(k for k, v in target.items() if not isinstance(v, torch.Tensor))
    if wrong:
        raise TypeError(
            f"load_safetensors_into fills tensors; the mapping holds non-tensor values at "
            f"{wrong[:8]}. Pass a module, or a dict of its tensors only."
        )
    return dict(target)


def _check_shape(file: SafetensorsFile, source: str, name: str, target: torch.Tensor) -> None:
    shape = tuple(file.shape(source))
    if shape != tuple(target.shape):
        raise ValueError(
            f"a stored tensor must have the shape of the tensor it fills; {source!r} in "
            f"{os.path.basename(file.path)} is {list(shape)}, the target {name!r} is "
            f"{list(target.shape)}. Load the weights of the same architecture."
        )


_Job = tuple[SafetensorsFile, str, torch.Tensor]


def _plan(
    files: list[SafetensorsFile], targets: dict[str, torch.Tensor], strict: bool
) -> tuple[list[_Job], list[str], list[str]]:
    """``(file, stored name, target)`` for every target the files fill, each memory once, with
    the missing and unexpected names; keys and shapes are all checked before any write."""
    found: dict[str, tuple[SafetensorsFile, str]] = {}
    stored: set[str] = set()
    for file in files:
        names = file.keys()
        stored.update(names)
        for name in names:
            found.setdefault(name, (file, name))
        for alias, source in read_tied_aliases(file).items():
            if source in file:
                stored.add(alias)
                found.setdefault(alias, (file, source))
    missing = [k for k in targets if k not in found]
    unexpected = sorted(stored - set(targets))
    if strict and (missing or unexpected):
        paths = [f.path for f in files]
        raise CheckpointKeysError(
            f"with strict=True the files must hold exactly the target's tensors; {len(missing)} "
            f"are missing {missing[:8]} and {len(unexpected)} are unexpected {unexpected[:8]} "
            f"(files: {[os.path.basename(p) for p in paths]}). Nothing was loaded. Load the "
            "weights of the same architecture, or pass strict=False to fill the matching names.",
            missing,
            unexpected,
            paths,
        )
    plan = []
    done: set[tuple[Any, ...]] = set()
    for name, target in targets.items():
        if name not in found:
            continue
        file, source = found[name]
        _check_shape(file, source, name, target)
        key = tensor_view_key(target.data)
        if key not in done:  # a tied tensor is filled once, through its first name
            done.add(key)
            plan.append((file, source, target))
    return plan, missing, unexpected


def load_safetensors_into(
    target: Union[nn.Module, Mapping[str, torch.Tensor]],
    files: Union[PathLike, Iterable[PathLike]],
    *,
    threads: int | None = None,
    strict: bool = True,
) -> tuple[list[str], list[str]]:
    """Fill the existing tensors of a module (or a dict of tensors) from safetensors files.

    Each stored tensor is copied straight into the memory of the tensor of the same name, so no
    second copy of the weights is ever held. Contiguous CPU tensors of the stored dtype are read
    with ``preadv`` in chunks of `CHUNK_BYTES` by ``threads`` threads at once (the calling
    thread one of them); other
    tensors (another dtype, device or layout) are copied from the memory-mapped file. Names
    recorded as aliases by [`save_safetensors_file`][accel_bigmodel.save_safetensors_file] are filled through their stored name;
    tied tensors of the target are written once. Keys and shapes are checked before any byte
    is written, so a refused load changes nothing.

    Args:
        target: A module that [`supports_in_place_load`][accel_bigmodel.supports_in_place_load] (its ``state_dict(keep_vars=True)``
            tensors are filled), or a mapping of names to tensors.
        files: One safetensors file or several (shards); the first file holding a name wins.
        threads: Reader threads (default [`default_threads`][accel_bigmodel.default_threads]).
        strict: Refuse when the target's names and the files' names differ.

    Returns:
        ``(missing, unexpected)``: target names no file holds, stored names the target lacks.

    Raises:
        CheckpointKeysError: with ``strict``, when the names differ (both lists are named).
        ValueError: when a stored tensor's shape differs from its target's.
        TypeError: for a module with custom loading code, or a mapping with non-tensors.
        CorruptSafetensorsError: for a malformed or truncated file.
    """
    paths = [files] if isinstance(files, (str, os.PathLike)) else list(files)
    opened = [SafetensorsFile(p) for p in paths]
    targets = _targets(target)
    plan, missing, unexpected = _plan(opened, targets, strict)
    _copy(plan, threads or default_threads())
    return missing, unexpected


_Span = tuple[str, int, memoryview]


def _copy(plan: list[_Job], threads: int) -> None:
    spans: list[_Span] = []
    casts: list[_Job] = []
    for file, source, target in plan:
        data = target.data
        if data.device.type == "cpu" and data.is_contiguous() and data.dtype == file.dtype(source):
            start, buffer = file.destination(source, data)
            for at in range(0, len(buffer), CHUNK_BYTES):
                spans.append((file.path, start + at, buffer[at : at + CHUNK_BYTES]))
        else:
            casts.append((file, source, data))
    spans.sort(key=lambda span: (span[0], span[1]))  # file order: the kernel reads ahead

    def cast(job: _Job) -> None:
        file, source, data = job
        with torch.no_grad():
            data.copy_(file.view(source))

    groups = _partition(spans, threads)
    if len(groups) <= 1 and len(casts) <= 1:
        for group in groups:
            _read_group(group)
        for job in casts:
            cast(job)
        return
    with ThreadPoolExecutor(max_workers=threads, thread_name_prefix="accel-read") as pool:
        # The calling thread reads the first run itself: one thread fewer to start and wait for.
        others = [pool.submit(_read_group, group) for group in groups[1:]]
        if groups:
            _read_group(groups[0])
        for future in others:
            future.result()
        for _ in pool.map(cast, casts):
            pass


def _partition(spans: list[_Span], parts: int) -> list[list[_Span]]:
    """``spans`` cut into at most ``parts`` runs of consecutive spans with about equal bytes."""
    total = sum(len(span[2]) for span in spans)
    groups: list[list[_Span]] = [[]]
    done = 0
    for span in spans:
        if groups[-1] and done >= total * len(groups) / parts:
            groups.append([])
        groups[-1].append(span)
        done += len(span[2])
    return [group for group in groups if group]


def _read_group(group: list[_Span]) -> None:
    """Read a run of spans in order through descriptors of this thread's own: each thread is
    one sequential stream that the kernel reads ahead of (a shared descriptor would mix the
    streams and defeat read-ahead on a cold page cache)."""
    fds: dict[str, int] = {}
    try:
        for path, offset, buffer in group:
            fd = fds.get(path)
            if fd is None:
                fd = fds[path] = os.open(path, os.O_RDONLY)
                if hasattr(os, "posix_fadvise"):
                    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_SEQUENTIAL)
            read_span(path, offset, buffer, fd)
    finally:
        for fd in fds.values():
            os.close(fd)

"""Streaming a checkpoint into a model: each tensor read once, straight to where it belongs."""

from __future__ import annotations

import logging
import os
import time
from collections import defaultdict
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Union

import torch
from torch import nn

from ..files._checkpoint_files import is_safetensors, resolve_checkpoint, torch_load
from ..files._progress import human_bytes, progress
from ..files._safetensors_io import SafetensorsFile, st_dtype_name
from ..offload._device_staging import DeviceStaging
from ..offload._offload import save_offload_index, write_offload_file
from ..offload._offload_layouts import SafetensorsStorage
from ..placement._device_map_use import check_device_map, mapped_device, require_offload_folder
from ..placement._sizes import resolve_dtype
from ..placement._tensors import (
    find_tied_parameters,
    get_submodule_and_name,
    normalize_device,
    retie_parameters,
    set_module_tensor_to_device,
)
from ._weights_io import CheckpointKeysError

logger = logging.getLogger("accel_bigmodel.modeling")

PathLike = Union[str, "os.PathLike[str]"]


def _check_keys(
    missing: list[str],
    unexpected: list[str],
    on_meta: list[str],
    files: list[str],
    strict: bool,
) -> None:
    read = _short([os.path.basename(f) for f in files], limit=5)
    if strict and (missing or unexpected):
        raise CheckpointKeysError(
            f"With strict=True the checkpoint must hold exactly the model's tensors; "
            f"{len(missing)} model tensors are missing {_short(missing)} and "
            f"{len(unexpected)} checkpoint tensors are unexpected {_short(unexpected)} (files "
            f"read: {read}). Nothing was loaded. Fix the checkpoint or the model config, or pass "
            f"strict=False to keep missing tensors as they are and skip unexpected ones.",
            missing,
            unexpected,
            files,
        )
    if on_meta:
        raise CheckpointKeysError(
            f"Model tensors missing from the checkpoint keep their current values, but "
            f"{len(on_meta)} of them are on the meta device (built under init_empty_weights) and "
            f"have none: {_short(on_meta)} (files read: {read}). Nothing was loaded. Load a "
            f"checkpoint that holds them, or give them real values before loading (create those "
            f"modules outside init_empty_weights, or call model.to_empty(device='cpu') and "
            f"initialise them).",
            missing,
            unexpected,
            files,
        )


@dataclass
class LoadReport:
    """What [`load_checkpoint_in_model`][accel_bigmodel.load_checkpoint_in_model] did; stored as ``model._accel_load_report``."""

    bytes_by_device: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Bytes placed per device (``"disk"`` included)."""
    tensors_by_device: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    """Tensors placed per device."""
    disk_in_place: int = 0
    """Disk tensors used where they are in the checkpoint's safetensors files."""
    disk_written: int = 0
    """Disk tensors written to the offload folder (format or dtype differs)."""
    missing_keys: list[str] = field(default_factory=list)
    """Model tensors the checkpoint did not provide."""
    unexpected_keys: list[str] = field(default_factory=list)
    """Checkpoint tensors the model does not have."""
    seconds: float = 0.0
    """Wall time of the load."""

    def summary(self) -> str:
        """One line: where the weights went."""
        parts = []
        for device, count in self.bytes_by_device.items():
            part = f"{device} {human_bytes(count)} ({self.tensors_by_device[device]} tensors"
            if device == "disk":
                part += f", {self.disk_in_place} used in place, {self.disk_written} written"
            parts.append(part + ")")
        total = sum(self.bytes_by_device.values())
        return f"Loaded {human_bytes(total)} in {self.seconds:.2f}s: " + ", ".join(parts)


def _keep_fp32(name: str, modules: list[str] | None) -> bool:
    if not modules:
        return False
    dotted = f".{name}."
    return any(f".{m}." in dotted for m in modules)


def _target_dtype(
    stored: torch.dtype,
    current: torch.Tensor,
    dtype: torch.dtype | None,
    name: str,
    keep_in_fp32_modules: list[str] | None,
) -> torch.dtype:
    if stored.is_floating_point:
        if dtype is None:
            return current.dtype if current.is_floating_point() else stored
        if _keep_fp32(name, keep_in_fp32_modules):
            return torch.float32
        return dtype
    return current.dtype if not current.is_floating_point() else stored


class _Source:
    """One checkpoint file: safetensors (memory-mapped, read in place) or a torch pickle."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.safe = is_safetensors(path)
        self.handle = SafetensorsFile(path) if self.safe else None
        self.state = None if self.safe else torch_load(path)

    def keys(self) -> list[str]:
        return self.handle.keys() if self.handle is not None else list(self.state or {})

    def dtype(self, name: str) -> torch.dtype:
        if self.handle is not None:
            return self.handle.dtype(name)
        assert self.state is not None
        return self.state[name].dtype

    def shape(self, name: str) -> tuple[int, ...]:
        if self.handle is not None:
            return tuple(self.handle.shape(name))
        assert self.state is not None
        return tuple(self.state[name].shape)

    def raw(self, name: str) -> torch.Tensor:
        """The stored tensor without a copy (memory-mapped)."""
        if self.handle is not None:
            return self.handle.view(name)
        assert self.state is not None
        return self.state[name]

    def materialize(self, name: str, dtype: torch.dtype, mmap: bool = False) -> torch.Tensor:
        """A CPU tensor of ``dtype`` holding the stored value.

        With ``mmap`` and a matching dtype it is a view of the memory-mapped file (no copy);
        otherwise a fresh tensor filled by one read or one cast.
        """
        if self.handle is not None and self.handle.dtype(name) == dtype:
            if mmap:
                return self.handle.view(name)
            return self.handle.load(name)
        source = self.raw(name)
        out = torch.empty(source.shape, dtype=dtype)
        out.copy_(source)
        return out


def load_checkpoint_in_model(
    model: nn.Module,
    checkpoint: PathLike,
    device_map: Mapping[str, Any] | None = None,
    offload_folder: PathLike | None = None,
    dtype: Union[str, torch.dtype, None] = None,
    offload_state_dict: bool = False,
    offload_buffers: bool = False,
    keep_in_fp32_modules: list[str] | None = None,
    offload_8bit_bnb: bool = False,
    strict: bool = False,
    full_state_dict: bool = True,
    broadcast_from_rank0: bool = False,
    *,
    show_progress: bool | None = None,
    num_threads: int | None = None,
    mmap: bool = True,
) -> None:
    """Loads a (possibly sharded) checkpoint into a model, placing each weight as it is read.

    Safetensors shards are memory-mapped once. CPU weights whose stored dtype is the one wanted
    stay views of that mapping (no copy: pages are read on first use and shared with the page
    cache; the mapping is copy-on-write, the file is never modified); with ``mmap=False``, or
    when a cast or another device is needed, each tensor is read once straight into its final
    memory, by several threads. No full state dict is ever held in RAM, so the peak resident
    memory is what the model keeps (``offload_state_dict`` is therefore satisfied by
    construction). Weights mapped to ``"disk"`` are used in place when the checkpoint already
    holds them as safetensors in the right dtype, and otherwise written once to
    ``offload_folder`` as safetensors; ``offload_folder/index.json`` lists them.

    Args:
        model: The model to fill (typically built under [`init_empty_weights`][accel_bigmodel.init_empty_weights]).
        checkpoint: A weight file, an index ``.json``, or a folder holding one index or one
            ``model.safetensors`` / ``pytorch_model.bin``.
        device_map: Module name -> device (``int``, ``"cpu"``, ``"disk"`` ...). When ``None``,
            each weight goes to the device of the tensor it replaces (CPU for meta tensors).
        offload_folder: Where disk weights are indexed (required if ``device_map`` uses disk).
        dtype: Cast floating-point weights to this dtype.
        offload_state_dict: Accepted for compatibility; never needed (see above).
        offload_buffers: Send buffers of disk modules to disk too (else they stay on the CPU).
        keep_in_fp32_modules: Module names whose weights stay in ``float32`` when ``dtype``
            is given.
        offload_8bit_bnb: Not supported (8-bit weights belong to a quantization package).
        strict: Raise if checkpoint and model keys differ. Otherwise missing tensors keep
            their current values and unexpected ones are skipped, with a warning; a missing
            tensor on the ``meta`` device (no value to keep) is still an error.
        full_state_dict: Accepted for compatibility (tensors are always loaded whole).
        broadcast_from_rank0: Not supported: every process reads the checkpoint itself.
        show_progress: Draw a progress bar (default: only on a terminal, with tqdm installed).
        num_threads: Reader threads (default: up to 4, bounded by the CPU count).
        mmap: Keep CPU weights of safetensors checkpoints as memory-mapped views when no cast is
            needed. ``False`` reads them into private memory.

    Raises:
        FileNotFoundError: Missing checkpoint or shard.
        DeviceMapError: Bad device map (device absent here, unknown module, disk without
            ``offload_folder``).
        CheckpointKeysError: Key mismatch under ``strict=True``, or missing tensors on ``meta``;
            raised before any weight is placed, naming the keys and the files read.
        ValueError: Corrupted file or shape mismatch.
    """
    if offload_8bit_bnb:
        raise ValueError(
            "offload_8bit_bnb=True needs bitsandbytes 8-bit weights, which accel-bigmodel does "
            "not handle; got offload_8bit_bnb=True. Use accel-precision's quantization loader."
        )
    if broadcast_from_rank0:
        raise ValueError(
            "broadcast_from_rank0=True needs a process group, which accel-bigmodel does not "
            "manage; got broadcast_from_rank0=True. Load the checkpoint on every process instead."
        )
    start = time.perf_counter()
    target_dtype = resolve_dtype(dtype)
    if device_map is not None:
        check_device_map(model, device_map, check_devices=True)
        device_map = dict(device_map)
        require_offload_folder(device_map, offload_folder, "offload_folder")
    files = resolve_checkpoint(checkpoint)
    tied_groups = find_tied_parameters(model)
    tensors: dict[str, torch.Tensor] = {}
    buffers: set[str] = set()
    for name, param in model.named_parameters(remove_duplicate=False):
        tensors[name] = param
    for name, buf in model.named_buffers(remove_duplicate=False):
        tensors[name] = buf
        buffers.add(name)
    expected = list(model.state_dict().keys())
    state_keys = set(expected)

    report = LoadReport()
    disk_index: dict[str, Any] = {}
    loaded: set[str] = set()
    sources = [_Source(path) for path in files.files]
    jobs: list[tuple[_Source, str, torch.device, torch.dtype]] = []
    to_write: list[tuple[_Source, list[tuple[str, torch.dtype]]]] = []
    to_meta: list[tuple[str, torch.dtype]] = []
    for source in sources:
        writes: list[tuple[str, torch.dtype]] = []
        for name in source.keys():
            # Only state-dict entries load: a non-persistent buffer in a checkpoint is unexpected.
            current = tensors.get(name) if name in state_keys else None
            if current is None:
                report.unexpected_keys.append(name)
                continue
            if tuple(current.shape) != source.shape(name):
                raise ValueError(
                    f"A checkpoint tensor must have the model's shape; {name!r} is "
                    f"{list(source.shape(name))} in {source.path} but {list(current.shape)} in "
                    f"the model. Check that the model config matches the checkpoint."
                )
            want = _target_dtype(
                source.dtype(name), current, target_dtype, name, keep_in_fp32_modules
            )
            if device_map is None:
                device: Any = current.device if current.device.type != "meta" else "cpu"
            else:
                device = mapped_device(device_map, name)
                if device == "disk" and name in buffers and not offload_buffers:
                    device = "cpu"
            loaded.add(name)
            if device == "disk":
                nbytes = current.numel() * torch.empty((), dtype=want).element_size()
                report.bytes_by_device["disk"] += nbytes
                report.tensors_by_device["disk"] += 1
                if source.handle is not None and source.dtype(name) == want:
                    disk_index[name] = {
                        "safetensors_file": os.path.abspath(source.path),
                        "weight_name": name,
                        "dtype": st_dtype_name(want),
                        "shape": list(current.shape),
                    }
                    report.disk_in_place += 1
                else:
                    writes.append((name, want))
                    report.disk_written += 1
                if current.device.type != "meta" or current.dtype != want:
                    # On the meta device with the dtype it is stored in: the offload hook casts
                    # the weights it brings in to this tensor's dtype.
                    to_meta.append((name, want))
                continue
            jobs.append((source, name, normalize_device(device), want))
        if writes:
            to_write.append((source, writes))

    for group in tied_groups:
        if any(n in loaded for n in group):
            loaded.update(group)
    report.missing_keys = [k for k in expected if k not in loaded]
    on_meta = [
        k
        for k in report.missing_keys
        if k in tensors
        and tensors[k].device.type == "meta"
        and (device_map is None or mapped_device(device_map, k) != "meta")
    ]
    _check_keys(report.missing_keys, report.unexpected_keys, on_meta, files.files, strict)
    for name, want in to_meta:
        cast = want if tensors[name].is_floating_point() else None
        set_module_tensor_to_device(model, name, "meta", dtype=cast)

    total_bytes = sum(
        tensors[name].numel() * torch.empty((), dtype=want).element_size()
        for _, name, _, want in jobs
    )
    total_bytes += sum(
        tensors[name].numel() * torch.empty((), dtype=want).element_size()
        for _, writes in to_write
        for name, want in writes
    )

    # Stored bytes bound for a CUDA device go through page-locked buffers, several at once.
    staging = DeviceStaging() if any(job[2].type == "cuda" for job in jobs) else None
    stored_files = SafetensorsStorage()

    def read(job: tuple[_Source, str, torch.device, torch.dtype]) -> torch.Tensor:
        source, name, device, want = job
        handle = source.handle
        if staging is not None and device.type == "cuda" and handle is not None:
            if handle.dtype(name) == want:
                stored = stored_files.tensor(handle, name)
                return staging.read_to(stored_files, stored, device)
        value = source.materialize(name, want, mmap=mmap and device.type == "cpu")
        if device.type != "cpu":
            value = value.to(device)
        return value

    workers = num_threads or max(1, min(4, os.cpu_count() or 1))
    with progress(total_bytes, "Loading checkpoint", show=show_progress) as bar:
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="accel-load") as pool:
            for job, value in zip(jobs, pool.map(read, jobs)):
                _, name, device, want = job
                set_module_tensor_to_device(model, name, device, value=value, dtype=want)
                key = str(device)
                report.bytes_by_device[key] += value.numel() * value.element_size()
                report.tensors_by_device[key] += 1
                bar.update(value.numel() * value.element_size())
        for number, (source, writes) in enumerate(to_write):
            file_name = f"offload-{number:05d}-{os.path.basename(source.path)}.safetensors"
            items = [(name, source.raw(name)) for name, _ in writes]
            entries = write_offload_file(
                offload_folder,  # type: ignore[arg-type]
                file_name,
                items,
                dtypes=dict(writes),
            )
            disk_index.update(entries)
            bar.update(
                sum(tensors[n].numel() * torch.empty((), dtype=w).element_size() for n, w in writes)
            )
    stored_files.close()

    for group in tied_groups:
        in_index = [n for n in group if n in disk_index]
        if in_index:
            for name in group:
                disk_index.setdefault(name, disk_index[in_index[0]])
    if disk_index:
        save_offload_index(disk_index, offload_folder)  # type: ignore[arg-type]

    report.seconds = time.perf_counter() - start
    if report.missing_keys:
        states = {
            "meta" if tensors[k].device.type == "meta" else "initialised"
            for k in report.missing_keys
            if k in tensors
        }
        logger.warning(
            "%d model tensors are not in the checkpoint and keep their %s values: %s",
            len(report.missing_keys),
            "/".join(sorted(states)) or "current",
            _short(report.missing_keys),
        )
    if report.unexpected_keys:
        # The opening words are the reference's (and transformers'): users search logs for them.
        logger.warning(
            "Some weights of the model checkpoint at %s were not used when initializing %s: "
            "%d checkpoint tensors do not belong to the model and were skipped: %s. Check that "
            "the checkpoint matches the model definition, or pass strict=True to make this an "
            "error.",
            os.fspath(checkpoint),
            type(model).__name__,
            len(report.unexpected_keys),
            _short(report.unexpected_keys),
        )
    retie_parameters(model, tied_groups)
    object.__setattr__(model, "_accel_load_report", report)
    logger.info(report.summary())


def _short(names: list[str], limit: int = 10) -> str:
    if not names:
        return "[]"
    shown = ", ".join(names[:limit])
    return f"[{shown}{', ...' if len(names) > limit else ''}] ({len(names)})"


def tensor_owner(model: nn.Module, name: str) -> tuple[nn.Module, str]:
    """``(module, leaf)`` holding tensor ``name``."""
    return get_submodule_and_name(model, name)

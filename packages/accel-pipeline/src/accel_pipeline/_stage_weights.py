"""Each process keeps only its stage's weights; a model built on ``meta`` loads only its stage.

Tracing shares the model's tensors with every stage of the traced pipeline, so after
``build_stage`` a process still references the whole model through the original module and the
other stages. `keep_only_stage` rebinds the original module and the process's stage to one
set of tensors (those the stage uses) and replaces every other tensor by a ``meta`` tensor, so
their storage is freed once nothing else holds it.

A model built under ``init_empty_weights()`` has ``meta`` parameters, which an eager forward and
``torch.export`` cannot mix with real inputs. `install_placeholders` gives each one a CPU
placeholder: one zero expanded to the parameter's shape (stride 0, a single element of storage),
so the example forward and the trace see the right shapes, dtypes and device without holding
weights. Values are then read from the checkpoint for the stage's tensors only.
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Union

import torch
from accel_bigmodel import load_checkpoint_in_model
from torch import nn

logger = logging.getLogger("accel_pipeline")

PathLike = Union[str, "os.PathLike[str]"]

TRACE_ROOT = "inner."
"""Prefix of the model's tensor names inside a traced stage (the tracing wrapper's attribute)."""


def _owner(root: nn.Module, name: str) -> tuple[nn.Module, str]:
    module_name, _, leaf = name.rpartition(".")
    return (root.get_submodule(module_name) if module_name else root), leaf


def _tensor_slots(module: nn.Module) -> Iterator[tuple[str, nn.Module, str, torch.Tensor]]:
    """Every ``(name, owner, leaf, tensor)`` of ``module``, tied names included."""
    for module_name, owner in module.named_modules(remove_duplicate=False):
        prefix = f"{module_name}." if module_name else ""
        for leaf, tensor in list(owner._parameters.items()) + list(owner._buffers.items()):
            if tensor is not None:
                yield prefix + leaf, owner, leaf, tensor


def _put(owner: nn.Module, leaf: str, tensor: torch.Tensor) -> None:
    if leaf in owner._parameters:
        if not isinstance(tensor, nn.Parameter):
            old = owner._parameters[leaf]
            tensor = nn.Parameter(tensor, requires_grad=bool(old is not None and old.requires_grad))
        owner._parameters[leaf] = tensor
    else:
        owner._buffers[leaf] = tensor


def _on_meta(tensor: torch.Tensor) -> torch.Tensor:
    meta = torch.empty_like(tensor, device="meta")
    if isinstance(tensor, nn.Parameter):
        return nn.Parameter(meta, requires_grad=tensor.requires_grad)
    return meta


def meta_tensor_names(model: nn.Module) -> list[str]:
    """Names of the model's parameters and buffers on the ``meta`` device."""
    return [name for name, _, _, t in _tensor_slots(model) if t.device.type == "meta"]


Slots = list[tuple[nn.Module, str, torch.Tensor]]


def restore(slots: Slots) -> None:
    """Puts back the tensors that `install_placeholders` replaced."""
    for owner, leaf, tensor in slots:
        _put(owner, leaf, tensor)


def install_placeholders(model: nn.Module) -> Slots:
    """Replaces each ``meta`` tensor of ``model`` by a stride-0 CPU placeholder of its shape.

    Tied tensors (one object under several names) get one shared placeholder.

    Returns:
        The replaced ``(owner, leaf, meta tensor)``, for `restore`.

    Raises:
        ValueError: When a non-persistent buffer is on ``meta``: no checkpoint holds its value.
    """
    persistent = set(model.state_dict().keys())
    lost = [
        name
        for name, owner, leaf, t in _tensor_slots(model)
        if t.device.type == "meta" and leaf in owner._buffers and name not in persistent
    ]
    if lost:
        raise ValueError(
            "A model built on the meta device gets its values from the checkpoint, but "
            f"non-persistent buffers are never saved in one; {lost[:5]} are on meta. Build the "
            "model under init_empty_weights() without include_buffers=True (buffers then keep "
            "their computed values)."
        )
    made: dict[int, torch.Tensor] = {}
    replaced: Slots = []
    for _, owner, leaf, tensor in list(_tensor_slots(model)):
        if tensor.device.type != "meta":
            continue
        if id(tensor) not in made:
            zero = torch.zeros((), dtype=tensor.dtype).expand(tensor.shape)
            if isinstance(tensor, nn.Parameter):
                made[id(tensor)] = nn.Parameter(zero, requires_grad=tensor.requires_grad)
            else:
                made[id(tensor)] = zero
        _put(owner, leaf, made[id(tensor)])
        replaced.append((owner, leaf, tensor))
    return replaced


@dataclass
class StageWeights:
    """What `keep_only_stage` kept and released in this process.

    Attributes:
        kept: Names (in the model) of the tensors this process's stage holds.
        released: Names of the model's tensors now on ``meta`` here.
        stage_bytes: Bytes of the distinct storages the stage holds.
        loaded_from: The checkpoint the stage's values were read from, if any.
    """

    kept: list[str] = field(default_factory=list)
    """Names (in the model) of the tensors this process's stage holds."""
    released: list[str] = field(default_factory=list)
    """Names of the model's tensors now on ``meta`` here."""
    stage_bytes: int = 0
    """Bytes of the distinct storages the stage holds."""
    loaded_from: str | None = None
    """The checkpoint the stage's values were read from, if any."""


def storage_bytes(tensors: Any) -> int:
    """Bytes of the distinct non-meta storages behind ``tensors`` (shared storage counted once)."""
    seen: dict[tuple[str, int], int] = {}
    for tensor in tensors:
        if tensor.device.type == "meta":
            continue
        storage = tensor.untyped_storage()
        seen[(str(tensor.device), storage.data_ptr())] = storage.nbytes()
    return sum(seen.values())


@contextlib.contextmanager
def _quiet_loader() -> Iterator[None]:
    # Loading one stage skips the other stages' tensors on purpose; the loader's warning about
    # "unexpected" checkpoint tensors would be noise here. Missing tensors are reported below.
    loader_log = logging.getLogger("accel_bigmodel")
    level = loader_log.level
    loader_log.setLevel(logging.ERROR)
    try:
        yield
    finally:
        loader_log.setLevel(level)


def _load_stage(
    kept: dict[str, torch.Tensor],
    aliases: dict[str, list[str]],
    checkpoint: PathLike,
    unset: set[str],
    device: torch.device,
    loadable: set[str],
) -> dict[str, torch.Tensor]:
    """Reads the values of ``kept`` (and their tied aliases) from ``checkpoint``.

    The tensors are placed in a bare module tree named like the model, so the streaming loader of
    accel-bigmodel reads only these keys, each straight into its own memory. Tensors named in
    ``unset`` (built on ``meta``) must be in the checkpoint; others keep their values if absent.
    Only ``loadable`` names (in the model's ``state_dict``) are read.
    """
    view = nn.Module()
    for name, tensor in kept.items():
        if name not in loadable:
            continue  # a non-persistent buffer: checkpoints do not hold it
        if name in unset:
            tensor = _on_meta(tensor)
        for alias in aliases.get(name, [name]):
            path, _, leaf = alias.rpartition(".")
            owner = view
            for part in path.split(".") if path else []:
                if part not in owner._modules:
                    owner.add_module(part, nn.Module())
                owner = owner._modules[part]  # type: ignore[assignment]
            if isinstance(tensor, nn.Parameter):
                owner.register_parameter(leaf, tensor)
            else:
                owner.register_buffer(leaf, tensor)
    with _quiet_loader():
        load_checkpoint_in_model(
            view, checkpoint, device_map={"": str(device)}, strict=False, mmap=False
        )
    report: Any = getattr(view, "_accel_load_report")  # noqa: B009
    if report.missing_keys:
        logger.warning(
            "%d tensors of this pipeline stage are not in %s and keep their current values: %s",
            len(report.missing_keys),
            os.fspath(checkpoint),
            report.missing_keys[:10],
        )
    loaded = dict(kept)
    for name in loadable:
        owner, leaf = _owner(view, name)
        value = owner._parameters[leaf] if leaf in owner._parameters else owner._buffers[leaf]
        assert value is not None
        loaded[name] = value
    return loaded


def _free_storages(dropped: list[torch.Tensor], kept: list[torch.Tensor]) -> None:
    """Frees the storage of every dropped tensor that no kept tensor shares.

    The traced program keeps references to the model's tensors in places this package does not
    own, so dropping references is not enough: the storage itself is shrunk to zero bytes. A
    stray use of a freed tensor then fails loudly instead of reading stale values.
    """
    in_use = {_storage_key(t) for t in kept if t.device.type != "meta"}
    for tensor in dropped:
        if tensor.device.type == "meta" or _storage_key(tensor) in in_use:
            continue
        storage = tensor.untyped_storage()
        if storage.nbytes() and storage.resizable():
            storage.resize_(0)


def _storage_key(tensor: torch.Tensor) -> tuple[str, int]:
    return str(tensor.device), tensor.untyped_storage().data_ptr()


def keep_only_stage(
    model: nn.Module,
    stage_module: nn.Module,
    other_stages: list[nn.Module],
    checkpoint: PathLike | None,
    unset: set[str] | frozenset[str] = frozenset(),
    device: Any = "cpu",
) -> StageWeights:
    """Leaves this process holding only its stage's tensors (read from ``checkpoint`` if given).

    Args:
        model: The original model; its tensors outside the stage become ``meta``, those inside
            are the very tensors the stage runs with.
        stage_module: This process's stage (names start with `TRACE_ROOT`).
        other_stages: The traced pipeline's other stages; their tensors become ``meta``.
        checkpoint: A safetensors file, index or folder holding the model's weights.
        unset: Names of the model's tensors that were built on ``meta`` (no values yet).
        device: This process's device (where the stage's values are loaded).

    Returns:
        What was kept and released.
    """
    by_id: dict[int, list[str]] = {}
    model_slots = list(_tensor_slots(model))
    for name, _, _, tensor in model_slots:
        by_id.setdefault(id(tensor), []).append(name)
    aliases = {name: names for names in by_id.values() for name in names}

    # Stage name -> model name; tied names of the model resolve to the first name of the group.
    stage_slots = list(_tensor_slots(stage_module))
    kept: dict[str, torch.Tensor] = {}
    in_model: list[tuple[nn.Module, str, str]] = []
    for name, owner, leaf, tensor in stage_slots:
        if not name.startswith(TRACE_ROOT) or name[len(TRACE_ROOT) :] not in aliases:
            continue  # a constant the trace created: the stage holds it alone
        canonical = aliases[name[len(TRACE_ROOT) :]][0]
        kept.setdefault(canonical, tensor)
        in_model.append((owner, leaf, canonical))
    if checkpoint is not None:
        unset_canonical = {aliases[n][0] for n in unset if n in aliases}
        persistent = set(model.state_dict().keys())
        loadable = {n for n in kept if any(a in persistent for a in aliases[n])}
        kept = _load_stage(
            kept, aliases, checkpoint, unset_canonical, torch.device(device), loadable
        )
    for owner, leaf, canonical in in_model:
        _put(owner, leaf, kept[canonical])
    result = StageWeights(kept=sorted(kept))
    dropped: list[torch.Tensor] = []
    for name, owner, leaf, tensor in model_slots:
        canonical = aliases[name][0]
        if canonical in kept:
            _put(owner, leaf, kept[canonical])
        elif tensor.device.type != "meta":
            _put(owner, leaf, _on_meta(tensor))
            result.released.append(name)
            dropped.append(tensor)
    for other in other_stages:
        for _, owner, leaf, tensor in list(_tensor_slots(other)):
            _put(owner, leaf, _on_meta(tensor))
            dropped.append(tensor)
    _free_storages(dropped, [t for _, _, _, t in _tensor_slots(stage_module)])
    result.stage_bytes = storage_bytes(t for _, _, _, t in _tensor_slots(stage_module))
    result.loaded_from = None if checkpoint is None else os.fspath(checkpoint)
    return result

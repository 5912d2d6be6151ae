"""Reading and writing the files of a training checkpoint.

Weights go through safetensors (or ``torch.save`` when asked); every other file is a
``torch.save`` pickle that is read back with ``torch.load(weights_only=True)``, so a tampered
file is refused instead of executed. Only types of torch's ``weights_only`` allow-list are
written (random states of numpy are stored as tensors for that reason); a registered object
whose state holds other types is refused when it is saved, not when the run tries to resume.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import torch
from accel_bigmodel import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    TIED_ALIASES_KEY,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    CheckpointKeysError,
    CorruptSafetensorsError,
    SafetensorsFile,
    UntrustedPickleError,
    find_tied_storages,
    load_safetensors_into,
    read_tied_aliases,
    safe_torch_load,
    save_safetensors_file,
    supports_in_place_load,
    tensor_view_key,
)
from accel_state import capture_rng_state, restore_rng_state

MODEL_NAME = "pytorch_model"
OPTIMIZER_NAME = "optimizer"
RNG_STATE_NAME = "random_states"
SCALER_NAME = "scaler.pt"
SCHEDULER_NAME = "scheduler"
SAMPLER_NAME = "dataloader"
CUSTOM_NAME = "custom_checkpoint"

__all__ = [
    "capture_rng_state",
    "restore_rng_state",
    "MODEL_NAME",
    "OPTIMIZER_NAME",
    "RNG_STATE_NAME",
    "SAFE_WEIGHTS_INDEX_NAME",
    "SAFE_WEIGHTS_NAME",
    "SCALER_NAME",
    "SCHEDULER_NAME",
    "WEIGHTS_INDEX_NAME",
    "WEIGHTS_NAME",
]


UnsafeCheckpointError = UntrustedPickleError
"""A checkpoint file holds objects outside the allow-list (refused without running them)."""

LOAD_STATE_OPT_IN = "load_state(..., trust_pickles=True)"
"""How a user of ``load_state`` opts in to unpickling a checkpoint they trust."""


def indexed_name(stem: str, ext: str, index: int) -> str:
    """``stem.ext`` for the first object, ``stem_<index>.ext`` for the others."""
    return f"{stem}.{ext}" if index == 0 else f"{stem}_{index}.{ext}"


def process_loader_file_name(index: int, rank: int) -> str:
    """File of the ``index``-th stateful dataloader of process ``rank`` (its workers' state
    differs per process): ``dataloader_<index>_process_<rank>.bin``."""
    return f"{SAMPLER_NAME}_{index}_process_{rank}.bin"


def weights_file_name(index: int, safe_serialization: bool) -> str:
    """File of the ``index``-th model: ``model[_i].safetensors`` or ``pytorch_model[_i].bin``."""
    if safe_serialization:
        return indexed_name("model", "safetensors", index)
    return indexed_name(MODEL_NAME, "bin", index)


def fsync_file(path: str) -> None:
    """Flush ``path`` to stable storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_dir(path: str) -> None:
    """Flush the entries of folder ``path`` (new, renamed or deleted names) to storage."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass  # some filesystems do not support fsync on folders
    finally:
        os.close(fd)


# --------------------------------------------------------------------------- pickles
def save_object(obj: Any, path: str) -> None:
    """``torch.save`` to ``path`` through a temporary name, flushed before the rename."""
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    fsync_file(tmp)
    os.replace(tmp, path)


def check_loadable(path: str, what: str) -> None:
    """Refuse a file just written if ``torch.load(weights_only=True)`` could not read it back.

    Raises:
        TypeError: naming the types outside the allow-list and how to fix it.
    """
    unsafe = torch.serialization.get_unsafe_globals_in_checkpoint(path)
    allowed = {_global_name(g) for g in torch.serialization.get_safe_globals()}
    refused = sorted(set(unsafe) - allowed)
    if refused:
        raise TypeError(
            f"checkpoint files other than weights may hold only tensors, numbers, strings and "
            f"containers of them, so that they load with torch.load(weights_only=True); the "
            f"state of {what} holds {refused}. Return plain values from its state_dict(), or "
            f"register the types with torch.serialization.add_safe_globals([...]) in both the "
            f"saving and the resuming script."
        )


def _global_name(obj: Any) -> str:
    if isinstance(obj, tuple):
        obj = obj[0]
    return f"{obj.__module__}.{obj.__qualname__}"


def load_object(path: str, trust_pickles: bool = False, **load_kwargs: Any) -> Any:
    """``torch.load(path, weights_only=True)`` with a clear error for refused content.

    Args:
        path: The file.
        trust_pickles: Unpickle with no restriction (the user opted in by name).
        **load_kwargs: More ``torch.load`` arguments (``map_location`` defaults to the CPU);
            ``weights_only`` cannot be given (``trust_pickles`` decides it).

    Raises:
        UnsafeCheckpointError: when the file holds objects outside the allow-list.
    """
    kwargs = {"mmap": False, **load_kwargs}
    return safe_torch_load(path, trust_pickles=trust_pickles, opt_in=LOAD_STATE_OPT_IN, **kwargs)


# --------------------------------------------------------------------------- weights
def view_key(tensor: torch.Tensor) -> tuple[object, ...]:
    """What makes two tensors the same view of the same memory (tied weights)."""
    return tensor_view_key(tensor)


def tied_aliases(state_dict: Mapping[str, torch.Tensor]) -> dict[str, str]:
    """Map each name whose tensor shares memory with an earlier name to that earlier name."""
    return find_tied_storages(state_dict)


def save_weights(state_dict: Mapping[str, Any], path: str, safe_serialization: bool) -> None:
    """Write a model state dict; tied tensors are written once and their aliases recorded."""
    if safe_serialization:
        try:
            save_safetensors_file(path, state_dict, durable=True)
        except TypeError as exc:
            raise TypeError(
                f"{exc} Call save_state(..., safe_serialization=False) for such a model."
            ) from None
        return
    aliases = tied_aliases(state_dict)
    unique = {k: v for k, v in state_dict.items() if k not in aliases}
    save_object({"state_dict": unique, TIED_ALIASES_KEY: aliases}, path)


def read_weights(path: str, trust_pickles: bool = False) -> tuple[dict[str, Any], dict[str, str]]:
    """Read a file written by `save_weights`: ``(state_dict, aliases)``; a torch pickle
    runs no code unless ``trust_pickles``."""
    if path.endswith(".safetensors"):
        handle = SafetensorsFile(path)
        state = {name: handle.load(name) for name in handle.keys()}
        return state, _stored_aliases(handle)
    return _unpack(load_object(path, trust_pickles=trust_pickles))


def _unpack(payload: Any) -> tuple[dict[str, Any], dict[str, str]]:
    if isinstance(payload, dict) and "state_dict" in payload and TIED_ALIASES_KEY in payload:
        return dict(payload["state_dict"]), dict(payload[TIED_ALIASES_KEY])
    return dict(payload), {}


def load_weights(
    module: torch.nn.Module,
    path: str,
    strict: bool = True,
    trust_pickles: bool = False,
    **load_kwargs: Any,
) -> tuple[list[str], list[str]]:
    """Load a file written by `save_weights` into ``module``.

    A module that ``supports_in_place_load`` (no custom ``_load_from_state_dict`` nor load
    hooks) is filled in place by accel-bigmodel's threaded reader, so no second copy of the
    weights is ever held; other modules go through ``module.load_state_dict``. Keys and shapes
    are checked before any tensor is written.

    A torch pickle (``.bin``) runs no code unless ``trust_pickles``.

    Returns:
        ``(missing_keys, unexpected_keys)``.

    Raises:
        KeyError: with ``strict``, when the keys differ (both lists are named).
    """
    if path.endswith(".safetensors") and supports_in_place_load(module) and not load_kwargs:
        try:
            return load_safetensors_into(module, path, strict=strict)
        except CheckpointKeysError as exc:
            raise _key_error(path, exc.missing_keys, exc.unexpected_keys) from None
        except CorruptSafetensorsError as exc:
            raise ValueError(str(exc)) from None
    state, aliases = read_weights(path, trust_pickles=trust_pickles)
    for alias, source in aliases.items():
        if source in state:
            state[alias] = state[source]
    result = module.load_state_dict(state, strict=False, **load_kwargs)
    missing, unexpected = list(result.missing_keys), list(result.unexpected_keys)
    if strict and (missing or unexpected):
        raise _key_error(path, missing, unexpected)
    return missing, unexpected


def check_weights(
    targets: Mapping[str, Any],
    path: str,
    strict: bool = True,
    *,
    trust_pickles: bool = False,
    tied: Mapping[str, str] | None = None,
) -> None:
    """Check, without loading a tensor, that a weights file fits a model's state dict.

    Reads the header of a safetensors file, or the pickle of a ``.bin`` file memory-mapped
    (``weights_only=True``), so no second copy of the weights is held.

    Raises:
        KeyError: with ``strict``, when the keys differ.
        ValueError: when a tensor's shape differs, or the file is not a valid weights file.
        UnsafeCheckpointError: when a ``.bin`` file holds objects outside the allow-list (and
            ``trust_pickles`` is False).

    ``tied`` maps names of the model that share memory with an earlier name to that name: a
    file that stores the tensor once, under either name, without recording the other (as the
    reference library writes safetensors) fits.
    """
    if path.endswith(".safetensors"):
        handle = SafetensorsFile(path)
        aliases = _stored_aliases(handle)
        shapes = {name: tuple(handle.shape(name)) for name in handle.keys()}
    else:
        try:
            payload = load_object(path, trust_pickles=trust_pickles, mmap=True)
        except RuntimeError:
            payload = load_object(
                path, trust_pickles=trust_pickles
            )  # a legacy (non-zip) file cannot be memory-mapped
        state, aliases = _unpack(payload)
        shapes = {k: tuple(v.shape) for k, v in state.items() if isinstance(v, torch.Tensor)}
        shapes.update({k: () for k, v in state.items() if not isinstance(v, torch.Tensor)})
    for later, first in (tied or {}).items():
        if later not in shapes and first in shapes:
            aliases.setdefault(later, first)
        elif first not in shapes and later in shapes:
            aliases.setdefault(first, later)
    missing, unexpected = _match_keys(targets, set(shapes), aliases)
    if strict and (missing or unexpected):
        raise _key_error(path, missing, unexpected)
    for name, target in targets.items():
        source = name if name in shapes else aliases.get(name)
        if source in shapes and isinstance(target, torch.Tensor):
            _check_shape(path, source, shapes[source], name, tuple(target.shape))


def _stored_aliases(handle: SafetensorsFile) -> dict[str, str]:
    try:
        return read_tied_aliases(handle)
    except CorruptSafetensorsError as exc:
        raise ValueError(str(exc)) from None


def _match_keys(
    targets: Mapping[str, Any], stored: set[str], aliases: Mapping[str, str]
) -> tuple[list[str], list[str]]:
    available = stored | {a for a, s in aliases.items() if s in stored}
    missing = [k for k in targets if k not in available]
    unexpected = sorted(available - set(targets))
    return missing, unexpected


def _key_error(path: str, missing: list[str], unexpected: list[str]) -> KeyError:
    return KeyError(
        f"a model must have exactly the keys of its checkpoint to load with strict=True; "
        f"{os.path.basename(path)} lacks {_short(missing)} and has extra {_short(unexpected)}. "
        "Prepare the same model architecture as the saving run, or pass strict=False to "
        "load_state to load the matching keys only."
    )


def _check_shape(
    path: str, source: str, shape: tuple[int, ...], name: str, target: tuple[int, ...]
) -> None:
    if shape != target:
        raise ValueError(
            f"a checkpoint tensor must have the shape of the model tensor it fills; "
            f"{source!r} in {os.path.basename(path)} is {list(shape)}, the model's "
            f"{name!r} is {list(target)}. Prepare the model of the saving run."
        )


def _short(names: list[str], limit: int = 8) -> str:
    if not names:
        return "[]"
    shown = ", ".join(repr(n) for n in names[:limit])
    more = f" and {len(names) - limit} more" if len(names) > limit else ""
    return f"[{shown}{more}]"


def stateful(objects: list[Any]) -> list[Any]:
    """The objects that have a ``state_dict`` method (the ones a checkpoint holds)."""
    return [obj for obj in objects if callable(getattr(obj, "state_dict", None))]

"""Finding the files of a checkpoint and reading single files into state dicts."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

import torch

from ._contained import contained_path
from ._safe_pickle import UntrustedPickleError, safe_torch_load
from ._safetensors_io import SafetensorsFile

WEIGHTS_NAME = "pytorch_model.bin"
SAFE_WEIGHTS_NAME = "model.safetensors"
WEIGHTS_INDEX_NAME = "pytorch_model.bin.index.json"
SAFE_WEIGHTS_INDEX_NAME = "model.safetensors.index.json"
SAFE_MODEL_NAME = "model"
"""Stem of safetensors weight files (``model.safetensors``, ``model_1.safetensors``)."""
SAFE_WEIGHTS_PATTERN_NAME = "model{suffix}.safetensors"
"""Name of a safetensors weight file; ``suffix`` is ``""``, ``"_1"`` or ``"-00001-of-00003"``."""
WEIGHTS_PATTERN_NAME = "pytorch_model{suffix}.bin"
"""Name of a pickled weight file; ``suffix`` as in ``SAFE_WEIGHTS_PATTERN_NAME``."""

PathLike = Union[str, "os.PathLike[str]"]

_CONVERT_TRUSTED = (
    "a conversion you run yourself: torch.load(path, weights_only=False) in your own code, "
    "then safetensors.torch.save_file(state_dict, 'model.safetensors')"
)


@dataclass
class CheckpointFiles:
    """The files that make up a checkpoint."""

    files: list[str]
    """Absolute paths of the weight files, in load order."""
    weight_map: dict[str, str] = field(default_factory=dict)
    """Tensor name -> file, from the index (empty for a single file)."""
    index_file: str | None = None
    """The index ``.json`` when the checkpoint is sharded."""


def _read_index(index_file: str) -> CheckpointFiles:
    try:
        with open(index_file, encoding="utf-8") as handle:
            index = json.load(handle)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(
            f"A checkpoint index must be JSON with a 'weight_map' object; {index_file} is not "
            f"valid JSON ({exc}). Re-download or re-save the checkpoint."
        ) from None
    weight_map = index.get("weight_map") if isinstance(index, dict) else None
    if weight_map is None and isinstance(index, dict) and index:
        # A bare mapping of tensor names to shard files (no "weight_map" wrapper) is an index too.
        if all(isinstance(shard, str) for shard in index.values()):
            weight_map = index
    if not isinstance(weight_map, dict):
        raise ValueError(
            f"A checkpoint index must hold a 'weight_map' object (tensor name -> shard file), "
            f"or be that mapping itself; "
            f"{index_file} has keys {sorted(index) if isinstance(index, dict) else type(index).__name__}. "
            f"Point to the index written with the shards."
        )
    folder = os.path.dirname(os.path.abspath(index_file))
    files: list[str] = []
    resolved: dict[str, str] = {}
    missing: list[str] = []
    for name, shard in weight_map.items():
        path = contained_path(folder, shard, index_file, name)
        resolved[name] = path
        if path not in files:
            files.append(path)
            if not os.path.isfile(path):
                missing.append(shard)
    if missing:
        raise FileNotFoundError(
            f"Every shard listed in a checkpoint index must exist next to it; {index_file} lists "
            f"{missing} which {'is' if len(missing) == 1 else 'are'} missing from {folder}. "
            f"Download or copy the missing shard(s) into that folder."
        )
    return CheckpointFiles(files=files, weight_map=resolved, index_file=index_file)


def resolve_checkpoint(checkpoint: PathLike) -> CheckpointFiles:
    """Finds the weight files of a checkpoint given as a file, an index or a folder.

    Raises:
        FileNotFoundError: If the path or a listed shard does not exist.
        ValueError: If a folder holds no recognisable checkpoint or several indexes.
    """
    path = os.fspath(checkpoint)
    if os.path.isfile(path):
        if path.endswith(".json"):
            return _read_index(path)
        return CheckpointFiles(files=[os.path.abspath(path)])
    if os.path.isdir(path):
        indexes = sorted(f for f in os.listdir(path) if f.endswith(".index.json"))
        if len(indexes) == 1:
            return _read_index(os.path.join(path, indexes[0]))
        if len(indexes) > 1:
            raise ValueError(
                f"A checkpoint folder must hold at most one '*.index.json'; {path} holds "
                f"{indexes}. Pass the path of the index you want instead of the folder."
            )
        for name in (SAFE_WEIGHTS_NAME, WEIGHTS_NAME):
            candidate = os.path.join(path, name)
            if os.path.isfile(candidate):
                return CheckpointFiles(files=[os.path.abspath(candidate)])
        raise ValueError(
            f"A checkpoint folder must hold one '*.index.json', a '{SAFE_WEIGHTS_NAME}' or a "
            f"'{WEIGHTS_NAME}'; {path} holds {sorted(os.listdir(path))[:10]}. Pass the weight "
            f"file itself, or save the checkpoint with one of those names."
        )
    raise FileNotFoundError(
        f"A checkpoint must be an existing file or folder; {path!r} does not exist. Check the path "
        f"(this library reads local files only)."
    )


def is_safetensors(path: str) -> bool:
    """Whether ``path`` names a safetensors file (by extension)."""
    return path.endswith(".safetensors")


def torch_load(path: str) -> dict[str, torch.Tensor]:
    """Loads a torch pickle safely (``weights_only=True``), memory-mapped when possible.

    Raises:
        UntrustedPickleError: when the file names a global outside the allow-list.
    """
    try:
        state = safe_torch_load(path, opt_in=_CONVERT_TRUSTED)
    except UntrustedPickleError:
        raise
    except Exception as exc:
        raise ValueError(
            f"A .bin checkpoint must be a torch.save'd state dict of tensors; {path} could "
            f"not be read with torch.load(weights_only=True): {exc}. Re-save it, or convert "
            f"it to safetensors."
        ) from None
    if not isinstance(state, Mapping):
        raise ValueError(
            f"A .bin checkpoint must hold a dict of tensors; {path} holds a "
            f"{type(state).__name__}. Save model.state_dict() instead."
        )
    if "state_dict" in state and isinstance(state["state_dict"], Mapping):
        state = state["state_dict"]
    return dict(state)


def load_state_dict(
    checkpoint_file: PathLike, device_map: Mapping[str, Any] | None = None
) -> dict[str, torch.Tensor]:
    """Loads a single checkpoint file into a state dict.

    Safetensors files are read tensor by tensor straight into the destination memory; with a
    ``device_map`` each tensor goes to its module's device (``"disk"`` entries stay on the CPU).
    Torch pickles are loaded with ``weights_only=True``.

    Args:
        checkpoint_file: Path of a ``.safetensors`` or torch pickle file.
        device_map: Module name -> device.

    Returns:
        Name -> tensor.
    """
    # Placement is imported here: the names and readers above serve loads without a device map
    # (load_state), which need none of it.
    from ..placement._device_map_use import mapped_device
    from ..placement._tensors import normalize_device

    path = os.fspath(checkpoint_file)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"A checkpoint file must exist; {path!r} does not. Check the path.")
    if is_safetensors(path):
        handle = SafetensorsFile(path)
        result: dict[str, torch.Tensor] = {}
        for name in handle.keys():
            tensor = handle.load(name)
            device = None if device_map is None else mapped_device(device_map, name)
            if device is not None and device != "disk":
                target = normalize_device(device)
                if target.type != "cpu":
                    tensor = tensor.to(target)
            result[name] = tensor
        return result
    state = torch_load(path)
    if device_map is not None:
        for name, tensor in state.items():
            device = mapped_device(device_map, name)
            if device is not None and device != "disk":
                state[name] = tensor.to(normalize_device(device))
    return state

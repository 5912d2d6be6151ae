"""Saving model weights for reuse: sharded safetensors folders and once-per-machine saves."""

from __future__ import annotations

import json
import logging
import os
import re
from collections.abc import Mapping
from typing import Any, Union

import torch
from accel_bigmodel import shard_checkpoint, write_safetensors
from accel_state import PartialState

from .._core._state_files import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    fsync_file,
    tied_aliases,
)

PathLike = Union[str, "os.PathLike[str]"]

_logger = logging.getLogger(__name__)


def save(
    obj: Any, f: Any, save_on_each_node: bool = False, safe_serialization: bool = False
) -> None:
    """Save ``obj`` to ``f`` once per job (or once per machine); use instead of ``torch.save``.

    Only the main process writes (the first process of each machine with
    ``save_on_each_node``), through a temporary name renamed when complete, so a reader never
    sees half a file. It does not wait for the other processes, so it may be called inside
    ``if accelerator.is_main_process:``.

    Args:
        obj: What to save; a dict of tensors when ``safe_serialization``.
        f: A path, or a writable binary file object (written as is).
        save_on_each_node: Write once per machine (machines without a shared filesystem).
        safe_serialization: Write safetensors instead of a torch pickle. Tensors that share
            memory with an earlier one are stored once, with a warning naming them.
    """
    state = PartialState()
    writes = state.is_local_main_process if save_on_each_node else state.is_main_process
    if not writes:
        return
    if not isinstance(f, (str, os.PathLike)):
        if safe_serialization:
            raise TypeError(
                "safe_serialization=True writes a file by path; got a file object "
                f"{type(f).__name__}. Pass a path, or safe_serialization=False."
            )
        torch.save(obj, f)
        return
    path = os.fspath(f)
    if safe_serialization:
        if not isinstance(obj, Mapping) or not all(
            isinstance(v, torch.Tensor) for v in obj.values()
        ):
            raise TypeError(
                "safe_serialization=True stores a dict of tensors only; got "
                f"{type(obj).__name__}. Save tensors, or pass safe_serialization=False."
            )
        unique = _drop_aliases(dict(obj), path)
        write_safetensors(path, unique, metadata={"format": "pt"})
        fsync_file(path)
        return
    tmp = path + ".tmp"
    torch.save(obj, tmp)
    os.replace(tmp, path)


def _drop_aliases(state_dict: dict[str, Any], path: str) -> dict[str, Any]:
    """``state_dict`` without the tensors that share memory with an earlier one, with a warning
    naming each removed tensor and the one it shares memory with."""
    aliases = tied_aliases(state_dict)
    if aliases:
        _logger.warning(
            "Removed shared tensor %s while saving %s: safetensors stores shared memory once, "
            "and each removed tensor shares memory with the kept one in %s. Loaders that know "
            "the model (load_checkpoint_in_model, load_state) tie them again; check that "
            "reloading reports no missing tensors.",
            sorted(aliases),
            path,
            aliases,
        )
    return {k: v for k, v in state_dict.items() if k not in aliases}


def _stale_pattern(weights_name: str) -> re.Pattern[str]:
    stem, _, ext = weights_name.rpartition(".")
    return re.compile(rf"^{re.escape(stem)}(-\d{{5}}-of-\d{{5}})?\.{re.escape(ext)}$")


def save_model_files(
    state_dict: dict[str, Any],
    save_directory: PathLike,
    max_shard_size: Union[int, str] = "10GB",
    safe_serialization: bool = True,
    save_on_each_node: bool = False,
) -> list[str]:
    """Write ``state_dict`` as one file or as shards plus an index, on the writing process.

    Tied tensors are stored once (under their first name); loaders that know the model, such
    as ``load_checkpoint_in_model``, tie them again. Weight files of an earlier save into the
    same folder that this save does not rewrite are deleted, so the folder never mixes two
    models.

    Returns:
        The names of the files written (empty on processes that do not write).
    """
    directory = os.fspath(save_directory)
    if os.path.isfile(directory):
        raise NotADirectoryError(
            f"save_model writes a folder of weight files; {directory!r} is a file. Pass a "
            "folder path."
        )
    state = PartialState()
    if not (state.is_local_main_process if save_on_each_node else state.is_main_process):
        return []
    os.makedirs(directory, exist_ok=True)
    weights_name = SAFE_WEIGHTS_NAME if safe_serialization else WEIGHTS_NAME
    index_name = SAFE_WEIGHTS_INDEX_NAME if safe_serialization else WEIGHTS_INDEX_NAME
    state_dict = {
        k: v.detach() if isinstance(v, torch.Tensor) else v for k, v in state_dict.items()
    }
    aliases = tied_aliases(state_dict)
    if safe_serialization:
        state_dict = {k: v for k, v in state_dict.items() if k not in aliases}
        others = sorted(k for k, v in state_dict.items() if not isinstance(v, torch.Tensor))
        if others:
            raise TypeError(
                f"safetensors stores tensors only; the state dict holds non-tensor entries "
                f"{others}. Pass safe_serialization=False for such a model."
            )
    shards, index = shard_checkpoint(state_dict, max_shard_size, weights_name)
    pattern = _stale_pattern(weights_name)
    for name in os.listdir(directory):
        if pattern.match(name) and name not in shards:
            os.remove(os.path.join(directory, name))
    for name, shard in shards.items():
        path = os.path.join(directory, name)
        if safe_serialization:
            write_safetensors(path, shard, metadata={"format": "pt"})
            fsync_file(path)
        else:
            tmp = path + ".tmp"
            torch.save(shard, tmp)
            os.replace(tmp, path)
    index_path = os.path.join(directory, index_name)
    if index is None:
        if os.path.exists(index_path):
            os.remove(index_path)
    else:
        tmp = index_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(index, handle, indent=2, sort_keys=True)
            handle.write("\n")
        os.replace(tmp, index_path)
    return sorted(shards) + ([index_name] if index is not None else [])

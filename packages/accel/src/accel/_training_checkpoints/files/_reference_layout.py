"""Checkpoint folders written by HuggingFace ``accelerate``'s ``save_state`` (1.x).

Such a folder has no ``accel_checkpoint.json``; its files have the names accel's own
checkpoints use (``model[_i].safetensors`` or ``pytorch_model[_i].bin``, ``optimizer[_i].bin``,
``scheduler[_i].bin``, ``scaler.pt``, ``custom_checkpoint_<i>.pkl``,
``random_states_<rank>.pkl``) plus ``dl_state_dict[_i].bin`` (the state of a stateful
dataloader, in torchdata's own form). `reference_manifest` lists them as a
`Manifest` (sizes, no checksums: that library records none), so ``load_state`` reads
them through the same checks as its own files: every pickle with ``weights_only=True``, every
file a regular file of the folder itself (a symbolic link is refused), everything read and
checked before anything is restored.

Differences of content are converted here: the random states hold numpy's generator state
as a tuple with a ``uint32`` array and the run's ``step`` (`convert_rng_state`).
Layouts of sharding engines (FSDP's ``pytorch_model_fsdp*``, DeepSpeed's ``pytorch_model/``)
are refused with an error naming them.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch

from ._manifest import MANIFEST_NAME, CheckpointIntegrityError, Manifest, read_manifest
from ._torch_load import TORCH_SAFE_GLOBALS

LAYOUT_KEY = "layout"
"""Key of `Manifest.extra` marking a manifest built from a reference folder."""
REFERENCE_LAYOUT = "accelerate"
STATEFUL_LOADER_NAME = "dl_state_dict"
"""Stem of the reference's file for a stateful dataloader (``dl_state_dict[_i].bin``)."""

_FILES = re.compile(
    r"^(model(_\d+)?\.safetensors|pytorch_model(_\d+)?\.bin|optimizer(_\d+)?\.bin"
    r"|scheduler(_\d+)?\.bin|dl_state_dict(_\d+)?\.bin|sampler(_\d+)?\.bin|scaler\.pt"
    r"|random_states_\d+\.pkl|custom_checkpoint_\d+\.pkl)$"
)
_RANDOM_STATES = re.compile(r"^random_states_(\d+)\.pkl$")
_CUSTOM = re.compile(r"^custom_checkpoint_\d+\.pkl$")
_SHARDED = re.compile(r"^(pytorch_model_fsdp.*|optimizer_\d+|pytorch_model(_\d+)?|latest)$")


def is_reference_checkpoint(path: str) -> bool:
    """Whether ``path`` is a folder without accel's manifest that holds the random states
    every process of a reference ``save_state`` writes: numpy's key as a numpy array (accel
    stores it as a tensor, so an accel folder that lost its manifest stays incomplete).

    The pickle's opcodes are scanned for the globals it names; nothing is unpickled.
    """
    if not os.path.isdir(path) or os.path.lexists(os.path.join(path, MANIFEST_NAME)):
        return False
    states = os.path.join(path, "random_states_0.pkl")
    if not os.path.lexists(states):
        return False
    try:
        named = torch.serialization.get_unsafe_globals_in_checkpoint(states)
    except Exception:
        return False  # not a torch.save file: not the reference's either
    return any(name.startswith("numpy.") and name.endswith(".ndarray") for name in named)


def reference_manifest(input_dir: str) -> Manifest:
    """A manifest of the reference checkpoint ``input_dir``: the files it holds, their sizes.

    Raises:
        CheckpointIntegrityError: a file to read is a symbolic link or not a regular file, or
            the random-state files do not number the processes ``0 .. n - 1``.
        NotImplementedError: the folder holds the layout of FSDP or DeepSpeed.
    """
    names = sorted(os.listdir(input_dir))
    sharded = [n for n in names if _SHARDED.match(n)]
    if sharded:
        raise NotImplementedError(
            "load_state reads checkpoints of HuggingFace accelerate saved without a sharding "
            f"engine (one process or DDP); {input_dir!r} holds {sharded[:4]}, the layout of "
            "its FSDP or DeepSpeed engine. Resume that run with accelerate, or merge its "
            "weights into one file (accelerate merge-weights, or DeepSpeed's zero_to_fp32.py) "
            "and load them with load_checkpoint_in_model before training on accel."
        )
    files: dict[str, int] = {}
    for name in names:
        if not _FILES.match(name):
            continue  # a user's file: never read
        path = os.path.join(input_dir, name)
        if os.path.islink(path) or not os.path.isfile(path):
            what = (
                f"a symbolic link to {os.readlink(path)!r}"
                if os.path.islink(path)
                else "not a file"
            )
            raise CheckpointIntegrityError(
                f"load_state reads only regular files inside the checkpoint folder; {name!r} in "
                f"{input_dir!r} is {what}. Replace it with the file itself (copy it in), or load "
                "another checkpoint."
            )
        files[name] = os.path.getsize(path)
    ranks = sorted(int(m.group(1)) for m in map(_RANDOM_STATES.match, files) if m)
    if ranks != list(range(len(ranks))):
        raise CheckpointIntegrityError(
            "each process of a save_state run writes random_states_<rank>.pkl, so the ranks "
            f"run 0 .. n - 1; {input_dir!r} holds the ranks {ranks[:8]}. Files are missing: "
            "copy the whole checkpoint folder, or load another one."
        )
    customs = sum(1 for name in files if _CUSTOM.match(name))
    return Manifest(
        format_version=0,
        world_size=len(ranks),
        step=0,
        files=files,
        extra={LAYOUT_KEY: REFERENCE_LAYOUT, "custom_objects": customs},
    )


def is_reference(manifest: Manifest) -> bool:
    """Whether ``manifest`` was built by `reference_manifest`."""
    return manifest.extra.get(LAYOUT_KEY) == REFERENCE_LAYOUT


def loader_file_name(index: int) -> str:
    """The reference's file of stateful dataloader ``index``."""
    return f"{STATEFUL_LOADER_NAME}.bin" if index == 0 else f"{STATEFUL_LOADER_NAME}_{index}.bin"


RNG_GLOBALS: list[Any] = TORCH_SAFE_GLOBALS
"""What the reference's random-state pickle names besides torch's allow-list: the numpy
functions and classes that rebuild its ``uint32`` key array (nothing that runs code)."""


def convert_rng_state(state: Any, name: str) -> tuple[dict[str, Any], int | None]:
    """The reference's random states as ``restore_rng_state`` takes them, and its ``step``.

    Raises:
        ValueError: the state is not the dict the reference writes (a numpy state that is not
            ``(str, uint32 array, int, int, float)``, a step that is not an int >= 0).
    """
    if not isinstance(state, Mapping):
        raise _bad_rng(name, f"it holds a {type(state).__name__}, not a dict")
    converted: dict[str, Any] = {}
    for key in ("random_state", "torch_manual_seed", "torch_cuda_manual_seed"):
        if key in state:
            converted[key] = state[key]
    numpy_state = state.get("numpy_random_seed")
    if numpy_state is not None:
        if not _is_numpy_state(numpy_state):
            raise _bad_rng(name, "'numpy_random_seed' is not (str, uint32 array, int, int, float)")
        kind, _, pos, has_gauss, cached = numpy_state
        converted["numpy_random_seed"] = {
            "kind": kind,
            "keys": torch.from_numpy(numpy_state[1].astype(np.int64)),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "cached_gaussian": float(cached),
        }
    step = state.get("step")
    if step is not None and (isinstance(step, bool) or not isinstance(step, int) or step < 0):
        raise _bad_rng(name, f"'step' is {step!r}, not an int >= 0")
    return converted, step


def _is_numpy_state(value: Any) -> bool:
    if not (isinstance(value, tuple) and len(value) == 5 and isinstance(value[0], str)):
        return False
    keys = value[1]
    return isinstance(keys, np.ndarray) and keys.dtype == np.uint32 and keys.ndim == 1


def _bad_rng(name: str, rule: str) -> ValueError:
    return ValueError(
        f"random states of a checkpoint are the dict save_state captured; {name} is not: "
        f"{rule}. The file was replaced: load an earlier checkpoint."
    )


def check_loader_state(state: Any, index: int, name: str) -> None:
    """Refuse a stateful dataloader state that is not in torchdata's own form.

    Raises:
        ValueError: naming the file and what it holds.
    """
    if not isinstance(state, Mapping) or "_iterator_finished" not in state:
        held = sorted(state)[:6] if isinstance(state, Mapping) else type(state).__name__
        raise ValueError(
            f"a stateful dataloader's state is the dict StatefulDataLoader.state_dict() returns "
            f"(with '_iterator_finished'); {name} for dataloader {index} holds {held}. The file "
            "was replaced: load an earlier checkpoint."
        )


def read_any_manifest(input_dir: str, expected_digest: str | None) -> Manifest:
    """accel's manifest of ``input_dir``, or one built from a reference checkpoint's files.

    Raises:
        FileNotFoundError, CheckpointIntegrityError: as ``read_manifest``, for a folder that is
            neither; a pinned digest asked of a reference checkpoint (it has no manifest).
    """
    if not is_reference_checkpoint(input_dir):
        return read_manifest(input_dir)
    if expected_digest is not None:
        raise CheckpointIntegrityError(
            "expected_digest pins the manifest accel's save_state writes; "
            f"{input_dir!r} was written by HuggingFace accelerate and has none. Load it "
            "without expected_digest, then save_state(..., checksum='sha256') and pin that one."
        )
    return reference_manifest(input_dir)

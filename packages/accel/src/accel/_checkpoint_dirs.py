"""Checkpoint folders: staging, manifest, atomic commit, discovery and rotation.

A checkpoint is written into a hidden sibling folder ``.<name>.partial`` and renamed to
``<name>`` only once every process has written its files and the manifest
(``accel_checkpoint.json``: format version, world size, step, file sizes) is on disk. A run
killed while saving leaves the ``.partial`` folder, which is ignored by loading and removed by the
next save; the previous checkpoint stays whole. Only folders holding a manifest count as
checkpoints.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import warnings
from dataclasses import dataclass, field
from typing import Any

from ._checkpoint_io import fsync_dir, fsync_file

MANIFEST_NAME = "accel_checkpoint.json"
FORMAT_VERSION = 1
_CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)$")


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
    extra: dict[str, Any] = field(default_factory=dict)
    """Counts of saved objects (models, optimizers ...) and the serialization used."""

    def to_json(self) -> str:
        return json.dumps(
            {
                "format_version": self.format_version,
                "world_size": self.world_size,
                "step": self.step,
                "files": self.files,
                **self.extra,
            },
            indent=1,
            sort_keys=True,
        )


def staging_dir(output_dir: str) -> str:
    """The hidden folder a checkpoint bound for ``output_dir`` is written into."""
    parent, name = os.path.split(os.path.abspath(output_dir))
    return os.path.join(parent, f".{name}.partial")


def _replaced_dir(output_dir: str) -> str:
    parent, name = os.path.split(os.path.abspath(output_dir))
    return os.path.join(parent, f".{name}.replaced")


def is_complete(path: str) -> bool:
    """Whether ``path`` is a folder holding a checkpoint manifest."""
    return os.path.isfile(os.path.join(path, MANIFEST_NAME))


def check_target(output_dir: str) -> None:
    """Refuse to replace a non-empty folder that is not a checkpoint.

    Saving replaces the whole folder, so pointing it at a folder of other files would delete
    them.
    """
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not is_complete(output_dir):
        raise FileExistsError(
            f"save_state replaces its output folder as a whole, so it must be new, empty or a "
            f"checkpoint written by save_state; {output_dir!r} holds other files "
            f"({sorted(os.listdir(output_dir))[:5]}). Choose another output_dir."
        )


def prepare_staging(output_dir: str) -> str:
    """Create an empty staging folder for ``output_dir`` (dropping one left by a crash)."""
    recover_replaced(output_dir)
    stage = staging_dir(output_dir)
    if os.path.exists(stage):
        shutil.rmtree(stage)
    os.makedirs(stage)
    return stage


def list_files(folder: str) -> dict[str, int]:
    """Relative path -> size of every file under ``folder``, each flushed to storage."""
    files: dict[str, int] = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            fsync_file(path)
            files[os.path.relpath(path, folder).replace(os.sep, "/")] = os.path.getsize(path)
    return files


def commit(stage: str, output_dir: str, manifest: Manifest) -> None:
    """Write the manifest into ``stage`` and move it to ``output_dir`` atomically."""
    manifest.files = {k: v for k, v in list_files(stage).items() if k != MANIFEST_NAME}
    path = os.path.join(stage, MANIFEST_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(manifest.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    fsync_dir(stage)
    output_dir = os.path.abspath(output_dir)
    parent = os.path.dirname(output_dir)
    if os.path.exists(output_dir):
        # Keep the old checkpoint under a hidden name until the new one is in place.
        old = _replaced_dir(output_dir)
        if os.path.exists(old):
            shutil.rmtree(old)
        os.replace(output_dir, old)
        os.replace(stage, output_dir)
        fsync_dir(parent)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(stage, output_dir)
    fsync_dir(parent)


def recover_replaced(output_dir: str) -> None:
    """Put back a checkpoint a crash left under its hidden name between the two renames."""
    old = _replaced_dir(output_dir)
    if os.path.isdir(old):
        if not os.path.exists(output_dir) and is_complete(old):
            os.replace(old, output_dir)
        else:
            shutil.rmtree(old, ignore_errors=True)


def read_manifest(input_dir: str) -> Manifest:
    """Read and check the manifest of ``input_dir``.

    Raises:
        FileNotFoundError: when the folder is missing or incomplete.
        ValueError: when it was written by a newer format.
    """
    if not os.path.isdir(input_dir):
        raise FileNotFoundError(
            f"load_state needs an existing checkpoint folder; {input_dir!r} does not exist. "
            "Pass the folder save_state wrote (or no argument with automatic_checkpoint_naming)."
        )
    path = os.path.join(input_dir, MANIFEST_NAME)
    if not os.path.isfile(path):
        partial = os.path.isdir(staging_dir(input_dir))
        hint = " (a save into it was interrupted)" if partial else ""
        raise FileNotFoundError(
            f"a checkpoint is complete only once save_state has written its {MANIFEST_NAME}; "
            f"{input_dir!r} has none{hint}, so it is incomplete or was not written by "
            "save_state. Load an earlier checkpoint."
        )
    with open(path, encoding="utf-8") as handle:
        data = json.load(handle)
    version = int(data.get("format_version", 0))
    if version > FORMAT_VERSION:
        raise ValueError(
            f"this version of accel reads checkpoint format {FORMAT_VERSION} and older; "
            f"{input_dir!r} has format {version}. Upgrade accel to load it."
        )
    known = {"format_version", "world_size", "step", "files"}
    return Manifest(
        format_version=version,
        world_size=int(data["world_size"]),
        step=int(data.get("step", 0)),
        files={str(k): int(v) for k, v in data.get("files", {}).items()},
        extra={k: v for k, v in data.items() if k not in known},
    )


def verify_file(input_dir: str, manifest: Manifest, name: str) -> str:
    """Path of ``name`` in the checkpoint after checking it against the manifest."""
    path = os.path.join(input_dir, name)
    expected = manifest.files.get(name)
    if expected is None:
        raise FileNotFoundError(
            f"every file load_state reads must be listed in the checkpoint manifest; {name!r} "
            f"is not listed in {input_dir!r}. The checkpoint was saved with fewer objects than "
            "this run prepared: prepare the same objects as the saving run."
        )
    actual = os.path.getsize(path) if os.path.isfile(path) else None
    if actual != expected:
        raise ValueError(
            f"a checkpoint file must have the size recorded in its manifest; {name!r} in "
            f"{input_dir!r} has {actual} bytes, the manifest says {expected}. The checkpoint "
            "was damaged after it was written: load an earlier one."
        )
    return path


def checkpoints_in(folder: str) -> list[tuple[int, str]]:
    """Complete ``checkpoint_<i>`` folders in ``folder``, oldest first."""
    if not os.path.isdir(folder):
        return []
    found = []
    for name in os.listdir(folder):
        match = _CHECKPOINT_RE.match(name)
        path = os.path.join(folder, name)
        if match and is_complete(path):
            found.append((int(match.group(1)), path))
    return sorted(found)


def checkpoint_index(path: str) -> int | None:
    """``i`` of a folder named ``checkpoint_<i>``, else None."""
    match = _CHECKPOINT_RE.match(os.path.basename(os.path.normpath(path)))
    return int(match.group(1)) if match else None


def rotate(folder: str, total_limit: int, keep: str) -> list[str]:
    """Delete the oldest complete checkpoints beyond ``total_limit``; never ``keep``.

    Stale staging folders of interrupted saves are removed too.
    """
    removed = []
    complete = checkpoints_in(folder)
    keep = os.path.abspath(keep)
    excess = len(complete) - total_limit
    for _, path in complete:
        if excess <= 0:
            break
        if os.path.abspath(path) == keep:
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
        excess -= 1
    for name in os.listdir(folder):
        if name.startswith(".checkpoint_") and name.endswith(".partial"):
            shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    fsync_dir(folder)
    return removed


def warn_world_size(manifest: Manifest, world_size: int, input_dir: str) -> None:
    """Explain what a resume on another number of processes restores."""
    warnings.warn(
        f"checkpoint {input_dir!r} was saved by {manifest.world_size} processes and is loaded "
        f"by {world_size}: models, optimizers, schedulers, the grad scaler and registered "
        "objects load in full; processes with an index present in the checkpoint restore their "
        "random states, the others keep their current ones; dataloaders resume mid-epoch only "
        "when their total batch size is unchanged.",
        stacklevel=3,
    )

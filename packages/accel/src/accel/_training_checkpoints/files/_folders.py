"""Checkpoint folders: staging, atomic commit, kept user files, discovery and rotation.

A checkpoint is written into a hidden sibling folder ``.<name>.partial`` (marked as accel's by
a ``.accel_staging`` file) and renamed to ``<name>`` only once every process has written its
files and the manifest (``accel_checkpoint.json``, see ``_checkpoint_manifest``) is on disk. A
run killed while saving leaves the ``.partial`` folder, which loading ignores and the next save
of the same folder removes; the previous checkpoint stays whole. Only folders holding a manifest
count as checkpoints.

Saving over an existing checkpoint replaces the files accel wrote (those its manifest lists)
and keeps every other file or folder a user put there (``eval_results.json``, notes): they are
moved into the new checkpoint. accel never deletes what it did not write: a path that is a
regular file, a symlink, a non-checkpoint folder with files, or a staging folder accel did not
make is refused before anything is written.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
import warnings

from ..._core._state_files import fsync_dir, fsync_file
from ._manifest import (
    MANIFEST_NAME,
    CheckpointIntegrityError,
    Manifest,
    file_checksum,
    read_manifest,
)
from ._reference_layout import is_reference_checkpoint
from ._writer_lock import remove_stale_locks

STAGING_MARKER = ".accel_staging"
_CHECKPOINT_RE = re.compile(r"^checkpoint_(\d+)$")


def staging_dir(output_dir: str) -> str:
    """The hidden folder a checkpoint bound for ``output_dir`` is written into."""
    parent, name = os.path.split(os.path.abspath(output_dir))
    return os.path.join(parent, f".{name}.partial")


def target_of(stage: str) -> str:
    """The checkpoint folder the staging folder ``stage`` is bound for."""
    parent, name = os.path.split(os.path.abspath(stage))
    if name.startswith(".") and name.endswith(".partial"):
        name = name[1 : -len(".partial")]
    return os.path.join(parent, name)


def remove_staging(output_dir: str) -> None:
    """Delete the staging folder of a save of ``output_dir`` that failed (only one accel made:
    the marker is there; a committed checkpoint is never touched).

    The marker goes last, so a removal cut short (the process stopped by its launcher when
    another one failed) leaves a folder still known as accel's, which the next save removes.
    Another process of the save may still write into the folder while it goes (each process
    writes its own files and fails on its own): the removal then starts again, a few times.
    """
    stage = staging_dir(output_dir)
    marker = os.path.join(stage, STAGING_MARKER)
    if os.path.islink(stage) or not os.path.isfile(marker):
        return
    for _ in range(_REMOVE_TRIES):
        for entry in os.listdir(stage):
            if entry != STAGING_MARKER:
                path = os.path.join(stage, entry)
                if os.path.isdir(path) and not os.path.islink(path):
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    _remove_quietly(path)
        left = os.listdir(stage)
        if left and left != [STAGING_MARKER]:
            time.sleep(_REMOVE_PAUSE)
            continue  # a file arrived, or could not go: the marker stays for now
        _remove_quietly(marker)
        try:
            os.rmdir(stage)
            return
        except FileNotFoundError:
            return
        except OSError:  # a file arrived after the marker went: mark the folder again
            try:
                _write_marker(stage, output_dir)
            except OSError:  # a full disk: an empty folder is removed by the next save
                pass
            time.sleep(_REMOVE_PAUSE)


_REMOVE_TRIES = 20
_REMOVE_PAUSE = 0.05


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _write_marker(stage: str, output_dir: str) -> None:
    with open(os.path.join(stage, STAGING_MARKER), "w", encoding="utf-8") as handle:
        json.dump({"target": os.path.basename(os.path.abspath(output_dir))}, handle)


def _is_empty_folder(path: str) -> bool:
    """A real folder with nothing in it: a staging folder whose files all went (nothing of
    anyone's to lose by removing it)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    try:
        return not os.listdir(path)
    except OSError:
        return False


def _replaced_dir(output_dir: str) -> str:
    parent, name = os.path.split(os.path.abspath(output_dir))
    return os.path.join(parent, f".{name}.replaced")


def is_complete(path: str) -> bool:
    """Whether ``path`` is a folder holding a checkpoint manifest."""
    return os.path.isfile(os.path.join(path, MANIFEST_NAME))


def _is_own_staging(path: str) -> bool:
    """Whether ``path`` is a staging folder made by accel (marker, or manifest once committed)."""
    if os.path.islink(path) or not os.path.isdir(path):
        return False
    return os.path.isfile(os.path.join(path, STAGING_MARKER)) or is_complete(path)


# --------------------------------------------------------------------------- before saving
def check_target(output_dir: str) -> None:
    """Refuse, before anything is written, a target whose replacement would lose data.

    Raises:
        NotADirectoryError: ``output_dir`` is a regular file (or another non-folder).
        FileExistsError: it is a symlink, a non-empty folder that is not a checkpoint, or a
            hidden ``.partial`` / ``.replaced`` sibling accel did not make is in the way.
        CheckpointIntegrityError: it is a checkpoint whose manifest cannot be read (its user
            files could not be told from accel's).
        ValueError: it is this process's working directory, or holds it.
    """
    if os.path.islink(output_dir):
        raise FileExistsError(
            f"save_state writes a folder in place and never replaces a symlink; {output_dir!r} "
            f"is a symlink to {os.readlink(output_dir)!r}. Pass the real folder "
            "(os.path.realpath) or another output_dir."
        )
    _refuse_own_folder(output_dir)
    if os.path.lexists(output_dir) and not os.path.isdir(output_dir):
        raise NotADirectoryError(
            f"save_state writes a checkpoint folder and never replaces a file; {output_dir!r} "
            "is a file. Move or delete that file, or choose another output_dir."
        )
    if os.path.isdir(output_dir) and os.listdir(output_dir) and not is_complete(output_dir):
        raise FileExistsError(
            f"save_state replaces only a folder it wrote, so output_dir must be new, empty or a "
            f"checkpoint written by save_state; {output_dir!r} holds other files "
            f"({sorted(os.listdir(output_dir))[:5]}). Choose another output_dir."
        )
    if is_complete(output_dir):
        try:
            read_manifest(output_dir)
        except CheckpointIntegrityError as exc:
            raise CheckpointIntegrityError(
                f"save_state keeps the files of an existing checkpoint that accel did not write, "
                f"which it tells apart by the manifest; the manifest of {output_dir!r} cannot "
                f"be read ({exc}). Move that folder away or choose another output_dir."
            ) from None
    stage = staging_dir(output_dir)
    for hidden in (stage, _replaced_dir(output_dir)):
        if hidden == stage and _is_empty_folder(hidden):
            continue  # an empty staging folder: `prepare_staging` removes it
        if os.path.lexists(hidden) and not _is_own_staging(hidden):
            raise FileExistsError(
                f"save_state stages a checkpoint in the hidden sibling {hidden!r} and removes "
                "only such folders that it made itself; this one was not made by accel. Move "
                "or delete it, or choose another output_dir."
            )


def _refuse_own_folder(output_dir: str) -> None:
    """Refuse a target that is (or holds) the folder this process stands in: committing
    renames the staged checkpoint over the target, which would leave the working directory
    deleted under the running process."""
    try:
        here = os.path.realpath(os.getcwd())
    except FileNotFoundError:
        return
    target = os.path.realpath(output_dir)
    if os.path.commonpath([here, target]) == target:
        raise ValueError(
            "save_state writes a checkpoint beside its target and renames it into place, which "
            f"replaces the target folder; {output_dir!r} is the working directory of this "
            f"process{'' if here == target else ' or holds it'} ({here!r}), which would be "
            "deleted under it. Save into a subfolder (e.g. save_state('checkpoint')) or change "
            "directory first."
        )


def prepare_staging(output_dir: str) -> str:
    """Create an empty, marked staging folder for ``output_dir``.

    A staging folder left by an interrupted save of the same folder (recognised by its marker)
    is removed first; call `check_target` before, which refuses anyone else's.
    """
    recover_replaced(output_dir)
    stage = staging_dir(output_dir)
    if _is_own_staging(stage):
        shutil.rmtree(stage)
    elif _is_empty_folder(stage):  # left empty by a failed save whose files all went
        os.rmdir(stage)
    os.makedirs(stage)
    try:
        _write_marker(stage, output_dir)
    except BaseException:
        # The folder was made a moment ago by this call (a full disk can refuse its first
        # file): leave nothing behind.
        shutil.rmtree(stage, ignore_errors=True)
        raise
    return stage


# --------------------------------------------------------------------------- commit
def list_files(
    folder: str, checksums: bool = True, algorithm: str = "crc32"
) -> tuple[dict[str, int], dict[str, str]]:
    """Sizes and checksums of every checkpoint file under ``folder``, each flushed to storage.

    The manifest and the staging marker are not listed. The files were written moments ago,
    so computing the checksums reads them from the page cache, not from the disk.
    """
    sizes: dict[str, int] = {}
    sums: dict[str, str] = {}
    for root, _, names in os.walk(folder):
        for name in names:
            path = os.path.join(root, name)
            rel = os.path.relpath(path, folder).replace(os.sep, "/")
            if rel in (MANIFEST_NAME, STAGING_MARKER):
                continue
            fsync_file(path)
            sizes[rel] = os.path.getsize(path)
            if checksums:
                sums[rel] = file_checksum(path, algorithm)
    return sizes, sums


def commit(stage: str, output_dir: str, manifest: Manifest, algorithm: str = "crc32") -> None:
    """Write the manifest into ``stage`` and move it to ``output_dir`` atomically.

    When ``output_dir`` is an earlier checkpoint, the files its manifest does not list (the
    user's) are moved into the new one.

    Raises:
        FileExistsError: a user file of the earlier checkpoint has the name of a file of the
            new one (nothing is replaced; the earlier checkpoint stays as it was).
    """
    output_dir = os.path.abspath(output_dir)
    manifest.files, manifest.checksums = list_files(stage, algorithm=algorithm)
    kept = foreign_entries(output_dir) if is_complete(output_dir) else []
    clashes = [rel for rel in kept if _clashes(stage, rel)]
    if clashes:
        raise FileExistsError(
            f"save_state keeps the files of {output_dir!r} that it did not write, and the new "
            f"checkpoint writes files of the same names: {clashes[:5]}. Rename or move those "
            "files, or save to another output_dir; nothing was replaced."
        )
    path = os.path.join(stage, MANIFEST_NAME)
    with open(path + ".tmp", "w", encoding="utf-8") as handle:
        handle.write(manifest.to_json())
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(path + ".tmp", path)
    os.remove(os.path.join(stage, STAGING_MARKER))  # the manifest marks the folder from now
    fsync_dir(stage)
    parent = os.path.dirname(output_dir)
    if os.path.exists(output_dir):
        # Keep the old checkpoint under a hidden name until the new one is in place.
        old = _replaced_dir(output_dir)
        if os.path.lexists(old):
            raise FileExistsError(
                f"save_state moves the earlier checkpoint aside while it replaces it, and "
                f"{old!r} is still there holding files that could not be moved back into "
                f"{output_dir!r}. Move your files out of it and delete it, then save again."
            )
        os.replace(output_dir, old)
        os.replace(stage, output_dir)
        fsync_dir(parent)
        _drop_replaced(old, output_dir)
    else:
        os.replace(stage, output_dir)
    fsync_dir(parent)


def _clashes(stage: str, rel: str) -> bool:
    parts = rel.split("/")
    for i in range(1, len(parts)):
        ancestor = os.path.join(stage, *parts[:i])
        if os.path.lexists(ancestor) and not os.path.isdir(ancestor):
            return True
    return os.path.lexists(os.path.join(stage, *parts))


def foreign_entries(folder: str) -> list[str]:
    """Files and folders of checkpoint ``folder`` that its manifest does not list (the user's).

    A folder that holds no listed file is one entry; folders holding listed files are searched.
    A folder without a manifest (an empty folder the user made for the checkpoint) lists
    nothing, so every entry in it is the user's.
    """
    listed = set(read_manifest(folder).files) | {MANIFEST_NAME} if is_complete(folder) else set()
    holders = {
        "/".join(name.split("/")[:i]) for name in listed for i in range(1, name.count("/") + 1)
    }
    found: list[str] = []

    def walk(rel: str) -> None:
        for entry in sorted(os.listdir(os.path.join(folder, rel))):
            child = f"{rel}/{entry}" if rel else entry
            full = os.path.join(folder, child)
            if child in listed:
                continue
            if child in holders and os.path.isdir(full) and not os.path.islink(full):
                walk(child)
            else:
                found.append(child)

    walk("")
    return found


def _drop_replaced(old: str, output_dir: str) -> None:
    """Move the user's files of the replaced checkpoint ``old`` into ``output_dir``, then
    delete ``old``; if a file cannot move, keep ``old`` and say so (never a silent delete)."""
    left = []
    for rel in foreign_entries(old):
        target = os.path.join(output_dir, *rel.split("/"))
        if _clashes(output_dir, rel):
            left.append(rel)
            continue
        os.makedirs(os.path.dirname(target), exist_ok=True)
        os.replace(os.path.join(old, *rel.split("/")), target)
    if left:
        warnings.warn(
            f"save_state keeps files it did not write; {left[:5]} of the replaced checkpoint "
            f"clash with files of the new one in {output_dir!r}, so they stay in {old!r}. Move "
            "them by hand.",
            stacklevel=3,
        )
        return
    shutil.rmtree(old, ignore_errors=True)


def recover_replaced(output_dir: str) -> None:
    """Finish a replacement a crash interrupted between the renames of `commit`.

    Only a hidden ``.replaced`` folder holding a manifest (accel's) is touched: put back when
    the new checkpoint never arrived, else its user files are moved over and it is removed.
    """
    old = _replaced_dir(output_dir)
    if os.path.islink(old) or not is_complete(old):
        return
    if not os.path.lexists(output_dir):
        os.replace(old, output_dir)
    elif is_complete(output_dir):
        _drop_replaced(old, output_dir)


# --------------------------------------------------------------------------- discovery
def checkpoints_in(folder: str, reference: bool = False) -> list[tuple[int, str]]:
    """Complete ``checkpoint_<i>`` folders in ``folder``, oldest first.

    Args:
        folder: The ``checkpoints`` folder of a project.
        reference: Count checkpoints written by HuggingFace accelerate too (to load them;
            rotation never deletes what accel did not write).
    """
    if not os.path.isdir(folder):
        return []
    found = []
    for name in os.listdir(folder):
        match = _CHECKPOINT_RE.match(name)
        path = os.path.join(folder, name)
        if match and (is_complete(path) or (reference and is_reference_checkpoint(path))):
            found.append((int(match.group(1)), path))
    return sorted(found)


def checkpoint_index(path: str) -> int | None:
    """``i`` of a folder named ``checkpoint_<i>``, else None."""
    match = _CHECKPOINT_RE.match(os.path.basename(os.path.normpath(path)))
    return int(match.group(1)) if match else None


def rotate(folder: str, total_limit: int, keep: str) -> list[str]:
    """Delete the oldest complete checkpoints beyond ``total_limit``; never ``keep``.

    Stale staging folders of interrupted saves (made by accel), checkpoints whose removal a
    kill interrupted and locks of writers that no longer run are removed too.
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
        _remove_checkpoint(path)
        removed.append(path)
        excess -= 1
    for name in os.listdir(folder):
        stale = os.path.join(folder, name)
        if not name.startswith(".checkpoint_") or os.path.islink(stale):
            continue
        if name.endswith(".partial") and _is_own_staging(stale):
            shutil.rmtree(stale, ignore_errors=True)
        elif name.endswith(_REMOVING) and os.path.isdir(stale):
            _finish_removal(stale)
    remove_stale_locks(folder)
    fsync_dir(folder)
    return removed


_REMOVING = ".removing"


def _remove_checkpoint(path: str) -> None:
    """Delete the checkpoint ``path`` so that a kill at any moment leaves either the whole
    checkpoint or a hidden ``.checkpoint_<i>.removing`` folder the next rotation finishes: it
    is first renamed aside (atomic), then emptied with its manifest removed last, so the
    folder holds a manifest (accel's) until it holds nothing."""
    parent, name = os.path.split(os.path.abspath(path))
    aside = os.path.join(parent, f".{name}{_REMOVING}")
    if os.path.lexists(aside):
        _finish_removal(aside)
    if os.path.lexists(aside):
        # Someone else's folder has that name: delete in place, manifest last.
        aside = path
    else:
        os.replace(path, aside)
    _finish_removal(aside)


def _finish_removal(folder: str) -> None:
    """Empty and remove ``folder``, a checkpoint being deleted: only while it holds its
    manifest (or nothing: the kill came after the manifest went), never anyone else's."""
    manifest = os.path.join(folder, MANIFEST_NAME)
    if os.path.isfile(manifest):
        for entry in os.listdir(folder):
            child = os.path.join(folder, entry)
            if entry == MANIFEST_NAME:
                continue
            if os.path.isdir(child) and not os.path.islink(child):
                shutil.rmtree(child, ignore_errors=True)
            else:
                os.unlink(child)
        os.unlink(manifest)
    try:
        os.rmdir(folder)  # refused (kept) when it holds files that are not accel's
    except OSError:
        pass


def warn_world_size(manifest: Manifest, world_size: int, input_dir: str) -> None:
    """Explain what a resume on another number of processes restores."""
    warnings.warn(
        f"checkpoint {input_dir!r} was saved by {manifest.world_size} processes and is loaded "
        f"by {world_size}: models, optimizers, schedulers, the grad scaler and registered "
        "objects load in full; processes with an index present in the checkpoint restore their "
        "random states, the others keep their current ones; dataloaders resume mid-epoch only "
        "when their total batch size is unchanged.",
        stacklevel=6,  # user code -> Accelerator.load_state -> Checkpointer
    )

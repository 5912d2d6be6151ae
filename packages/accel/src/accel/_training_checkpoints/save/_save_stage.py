"""The stage of a save: the writer takes the folder's lock, checks the target and opens the
staging folder; every process then meets and agrees on the folder. The writer closes the stage
when the save ends (the lock is released) or abandons it on a failure (the staging folder goes
too). Storage errors of any later step are named here too (the checkpoint and the file)."""

from __future__ import annotations

import errno
import os
import shutil
from typing import TYPE_CHECKING

from ..files._folders import (
    STAGING_MARKER,
    check_target,
    prepare_staging,
    remove_staging,
    staging_dir,
)
from ..files._writer_lock import acquire, release
from ._snapshot import CheckpointWriteError

if TYPE_CHECKING:
    from ..files._rendezvous import Rendezvous
    from ._save_pipeline import CommitPlan


def open_stage(plan: CommitPlan, rendezvous: Rendezvous) -> str:
    """Check the target and create the staging folder (writer), then meet every process."""
    if plan.writer:
        try:
            check_target(plan.output_dir)
            acquire(plan.output_dir)
            try:
                prepare_staging(plan.output_dir)
            except BaseException:
                release(plan.output_dir)
                raise
        except Exception as exc:
            error = named(plan, exc, STAGING_MARKER)  # a full disk names the file it refused
            rendezvous.meet("enter", error=describe(error))
            if error is exc:
                raise
            raise error from exc
    folders = rendezvous.meet("enter", payload=plan.output_dir)
    if len(set(folders)) > 1:
        # One checkpoint is one folder that every process writes into and one process commits.
        if plan.writer:
            shutil.rmtree(staging_dir(plan.output_dir), ignore_errors=True)
            release(plan.output_dir)
        listed = ", ".join(f"process {rank}: {folder!r}" for rank, folder in enumerate(folders))
        raise ValueError(
            "save_state writes one checkpoint folder that every process shares, so every "
            f"process must pass the same output_dir; got {listed}. Pass the same path on every "
            "process (e.g. make it on the main process and broadcast it, or name it from the "
            "run instead of tempfile on each process). Nothing was written."
        )
    return staging_dir(plan.output_dir)


def close_stage(plan: CommitPlan) -> None:
    """The save is over, committed or not: the writer releases the folder's lock."""
    if plan.writer:
        release(plan.output_dir)


def abandon_stage(plan: CommitPlan) -> None:
    """The save failed: the writer removes the staging folder and releases the lock."""
    if plan.writer:
        remove_staging(plan.output_dir)
        release(plan.output_dir)


_STORAGE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS}
"""The errors of the storage itself, which an engine's writer or the commit may hit."""


def named(plan: CommitPlan, exc: BaseException, default: str) -> BaseException:
    """``exc``, or for a storage error (a full disk ...), one that names the checkpoint and
    the file; any other error (a refused target, a clash) keeps its own message."""
    if not isinstance(exc, OSError) or isinstance(exc, CheckpointWriteError):
        return exc
    if exc.errno not in _STORAGE_ERRORS:
        return exc
    stage = staging_dir(plan.output_dir)
    name = os.path.relpath(exc.filename, stage) if isinstance(exc.filename, str) else default
    return CheckpointWriteError.of(stage, name, exc)


def describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"

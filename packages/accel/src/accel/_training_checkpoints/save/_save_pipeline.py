"""``save_state`` as one pipeline: plan, stage, write, commit, rotate.

[`save`][accel.Accelerator.save] reads the stages in order; each is a call into a module of its own:

1. plan (`CommitPlan`, made by ``Checkpointer.commit_plan``): what the commit needs, fixed
   at the call (an asynchronous save commits later, while the run has moved on);
2. stage (``_save_stage.open_stage``): the writer takes the folder's lock, checks the target
   and opens the hidden staging folder; every process meets and agrees on the folder. The
   stage module also closes it (``close_stage``: the lock is released) or abandons it
   (``abandon_stage``: the staging folder goes too);
3. write (``_snapshot``): every process takes its states and writes its files into the stage,
   at once (synchronous) or from host copies on a background thread (asynchronous);
4. commit (``_folders.commit``): once every process has written, the writer writes the manifest
   and renames the stage into place;
5. rotate (``_folders.rotate``): with ``total_limit``, the oldest checkpoints go.

A failure at any stage removes the stage (the writer), releases the lock, and fails every
process with an error naming the cause; earlier checkpoints are untouched.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..files._folders import commit, rotate, staging_dir
from ..files._manifest import FORMAT_VERSION, MANIFEST_NAME, Manifest, check_algorithm
from ..files._rendezvous import Rendezvous
from ._async_save import AsyncCheckpoint, HostBuffers, host_copy
from ._save_stage import abandon_stage, close_stage, describe, named, open_stage
from ._snapshot import take_snapshot, write_snapshot

if TYPE_CHECKING:
    from ..files._parts import CheckpointParts


@dataclass
class CommitPlan:
    """What the commit of a checkpoint needs, fixed when ``save_state`` is called (an
    asynchronous save commits later, while the run has moved on)."""

    output_dir: str
    writer: bool
    world_size: int
    rank: int
    """This process's global index."""
    step: int
    total_limit: int | None
    """``total_limit`` of automatic checkpoint naming (None: no rotation)."""
    checksum: str = "crc32"
    """The checksum the manifest records for each file (``"crc32"``, ``"sha256"``,
    ``"blake2b"``; another name is refused here)."""

    def __post_init__(self) -> None:
        self.checksum = check_algorithm(self.checksum)  # refused before anything is written

    def manifest(self, counts: dict[str, Any]) -> Manifest:
        """The manifest of this save, whose files `commit` lists."""
        return Manifest(
            format_version=FORMAT_VERSION, world_size=self.world_size, step=self.step, extra=counts
        )


def save(
    checkpointer: CheckpointParts,
    plan: CommitPlan,
    safe_serialization: bool,
    hooks: list[Callable[..., None]],
    buffers: HostBuffers | None = None,
) -> Any:
    """Write a checkpoint of ``checkpointer``'s objects to ``plan.output_dir``, on every
    process: synchronously, or with ``buffers`` on a background thread.

    Returns:
        The folder written, or the `AsyncCheckpoint` of an asynchronous save.
    """
    if buffers is not None:
        checkpointer.engine.check_async_save()  # refuse before any process creates a folder
    rendezvous = Rendezvous("save_state")
    stage = open_stage(plan, rendezvous)  # 2. stage
    if buffers is None:
        with _failing(plan, rendezvous, "written", "an engine's file"):
            counts = take_snapshot(
                checkpointer, plan, stage, safe_serialization, hooks
            ).counts  # 3.
        _commit_and_rotate(plan, rendezvous, counts, poll=False)  # 4. and 5.
        return plan.output_dir
    snapshot = _host_snapshot(
        checkpointer, plan, rendezvous, stage, safe_serialization, hooks, buffers
    )

    def finish() -> None:
        with _failing(plan, rendezvous, "written", "an engine's file"):
            write_snapshot(snapshot, stage, safe_serialization)  # 3. write, in the background
        _commit_and_rotate(plan, rendezvous, snapshot.counts, poll=True)  # 4. and 5.

    handle = AsyncCheckpoint(plan.output_dir, finish, on_done=buffers.reclaim)
    handle._start()
    return handle


def _commit_and_rotate(
    plan: CommitPlan, rendezvous: Rendezvous, counts: dict[str, Any], poll: bool
) -> None:
    """Wait until every process has written, then commit and rotate (the writer), meet once
    more, and release the lock."""
    try:
        with _failing(plan, rendezvous, None, "an engine's file"):
            rendezvous.meet("written", poll=poll)
        if plan.writer:
            with _failing(plan, rendezvous, "committed", MANIFEST_NAME):
                commit(
                    staging_dir(plan.output_dir),
                    plan.output_dir,
                    plan.manifest(counts),
                    plan.checksum,
                )
                if plan.total_limit is not None:
                    rotate(os.path.dirname(plan.output_dir), plan.total_limit, keep=plan.output_dir)
        rendezvous.meet("committed", poll=poll)
    finally:
        close_stage(plan)


@contextlib.contextmanager
def _failing(
    plan: CommitPlan, rendezvous: Rendezvous, phase: str | None, default: str
) -> Iterator[None]:
    """On a failure: remove the stage and release the lock (the writer), tell the others at
    meeting ``phase`` (None: the failure is that meeting's), and raise the error named."""
    try:
        yield
    except BaseException as exc:
        abandon_stage(plan)
        error = named(plan, exc, default) if phase is not None else exc
        if phase is not None:
            rendezvous.meet(phase, error=describe(error))
        if error is exc:
            raise
        raise error from exc


def _host_snapshot(
    checkpointer: CheckpointParts,
    plan: CommitPlan,
    rendezvous: Rendezvous,
    stage: str,
    safe_serialization: bool,
    hooks: list[Callable[..., None]],
    pool: HostBuffers,
) -> Any:
    """Take every state now as a host copy (the background thread writes the copies)."""
    pin = torch.cuda.is_available()
    try:
        snapshot = take_snapshot(
            checkpointer,
            plan,
            stage,
            safe_serialization,
            hooks,
            copy=lambda s: host_copy(s, pool, pin),
        )
        if pin and torch.cuda.is_initialized():
            torch.cuda.synchronize()
    except BaseException as exc:
        pool.reclaim()
        close_stage(plan)
        # The others learn it at the "written" meeting, as in a synchronous save.
        rendezvous.meet("written", error=f"{type(exc).__name__}: {exc}")
        raise
    return snapshot

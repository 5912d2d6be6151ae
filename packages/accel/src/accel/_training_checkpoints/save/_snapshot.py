"""What each process writes into a checkpoint, taken at the moment of ``save_state``.

Layout of a checkpoint folder (``i`` > 0 for the second and later object of a kind)::

    model[_i].safetensors | pytorch_model[_i].bin   weights, one file per prepared model
    optimizer[_i].bin                               optimizer states
    scheduler[_i].bin                               learning-rate scheduler states
    dataloader[_i].bin                              positions of prepared dataloaders
    dataloader_<i>_process_<rank>.bin               state of a stateful dataloader, per process
                                                    (with more than one process)
    scaler.pt                                       fp16 grad scaler (when there is one)
    custom_checkpoint_<i>.pkl                       objects of register_for_checkpointing
    random_states_<rank>.pkl                        generator states, one file per process
    accel_checkpoint.json                           manifest (sizes, checksums), written last

The engine decides how states are gathered; with replicated states (one process, DDP) the
main process writes everything but the random states (the local main of each machine with
``save_on_each_node``). Every process writes its own random states.
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from ..._core._state_files import (
    CUSTOM_NAME,
    OPTIMIZER_NAME,
    RNG_STATE_NAME,
    SAMPLER_NAME,
    SCALER_NAME,
    SCHEDULER_NAME,
    capture_rng_state,
    check_loadable,
    indexed_name,
    process_loader_file_name,
    save_object,
    save_weights,
    stateful,
    weights_file_name,
)
from ..files._folders import target_of

if TYPE_CHECKING:
    from ..files._parts import CheckpointParts


class Share(Protocol):
    """This process's share of a save, fixed when ``save_state`` is called (the save's
    ``CommitPlan``): the snapshot reads it there rather than asking the checkpointer again."""

    writer: bool
    """Whether this process writes the files shared by all processes."""
    world_size: int
    rank: int


@dataclass
class Snapshot:
    """What one process writes into a staging folder, taken at the moment of ``save_state``."""

    files: list[tuple[str, Any, str]] = field(default_factory=list)
    """``(relative name, state, kind)``; kind is ``"weights"``, ``"object"`` or the description
    of an object whose pickle is checked for ``weights_only`` loading after it is written."""
    jobs: list[Callable[[], None]] = field(default_factory=list)
    """Writes of the engine's own layout left to do (asynchronous saves of sharding engines)."""
    counts: dict[str, Any] = field(default_factory=dict)
    """Counts of the saved objects, for the manifest."""


def take_snapshot(
    checkpointer: CheckpointParts,
    share: Share,
    stage: str,
    safe_serialization: bool,
    hooks: list[Callable[..., None]],
    copy: Callable[[Any], Any] | None = None,
) -> Snapshot:
    """Run the save hooks and gather this process's states for ``stage``.

    Args:
        checkpointer: The checkpointer of the run (its registry, engine and scaler).
        share: Whether this process writes the shared files, its rank and the world size.
        stage: The staging folder; the hooks and a synchronous sharding engine write into it
            now.
        safe_serialization: Weights as safetensors (else ``torch.save``).
        hooks: The save-state pre-hooks.
        copy: None to write each file as soon as its state is taken (a synchronous save:
            the snapshot comes back empty but for its counts); else the function that copies
            each state to host memory for a later `write_snapshot`, and sharding
            engines snapshot their shards instead of writing them (`Snapshot.jobs`).
    """
    snapshot = Snapshot()

    def add(name: str, state: Any, kind: str) -> None:
        if copy is None:
            write_file(stage, name, state, kind, safe_serialization)  # synchronous: at once
        else:
            snapshot.files.append((name, copy(state), kind))

    models = list(checkpointer.prepared.models)
    optimizers = list(checkpointer.prepared.optimizers)
    states = checkpointer.engine.checkpoint_states(models, optimizers, stage, copy)
    snapshot.jobs.extend(states.jobs)
    weights = states.weights
    for hook in hooks:
        hook(models, weights, stage)
    schedulers = stateful(checkpointer.prepared.schedulers)
    loaders = stateful(checkpointer.prepared.dataloaders)
    customs = list(checkpointer.prepared.custom_objects)
    if share.writer:
        for i, state in enumerate(weights):
            add(weights_file_name(i, safe_serialization), state, "weights")
        for i, optimizer_state in enumerate(states.optimizers):
            add(indexed_name(OPTIMIZER_NAME, "bin", i), optimizer_state(), "object")
        groups = ((SCHEDULER_NAME, schedulers), (SAMPLER_NAME, loaders))
        for stem, objects in groups:
            for i, obj in enumerate(objects):
                add(indexed_name(stem, "bin", i), obj.state_dict(), f"{stem} {i}")
        if checkpointer.scaler is not None:
            add(SCALER_NAME, checkpointer.scaler.state_dict(), "the grad scaler")
        for i, obj in enumerate(customs):
            what = f"registered object {i} ({type(obj).__name__})"
            add(f"{CUSTOM_NAME}_{i}.pkl", obj.state_dict(), what)
    rank = share.rank
    if share.world_size > 1:
        # A stateful loader's workers hold per-process state: every process saves its own.
        for i, loader in enumerate(loaders):
            if getattr(loader, "use_stateful_dataloader", False):
                what = f"{SAMPLER_NAME} {i} of process {rank}"
                add(process_loader_file_name(i, rank), loader.state_dict(), what)
    add(f"{RNG_STATE_NAME}_{rank}.pkl", capture_rng_state(), "object")
    snapshot.counts = {
        "models": states.models,
        "optimizers": len(optimizers),
        "schedulers": len(schedulers),
        "dataloaders": len(loaders),
        "custom_objects": len(customs),
        "scaler": checkpointer.scaler is not None,
        "safe_serialization": bool(safe_serialization),
    }
    return snapshot


def write_file(stage: str, name: str, state: Any, kind: str, safe_serialization: bool) -> None:
    """Write one file of a snapshot (see `Snapshot.files`) into ``stage``.

    Raises:
        CheckpointWriteError: the file could not be written (a full disk ...), naming it.
    """
    path = os.path.join(stage, name)
    failure: CheckpointWriteError | None = None
    try:
        if kind == "weights":
            save_weights(state, path, safe_serialization)
        else:
            save_object(state, path)
    except OSError as exc:
        failure = CheckpointWriteError.of(stage, name, exc)
    except RuntimeError as exc:
        # torch.save reports a failed write as a RuntimeError of its stream writer.
        if not any(word in str(exc) for word in ("write", "inline_container", "iostream")):
            raise
        failure = CheckpointWriteError.of(stage, name, exc)
    if failure is not None:
        # Raised outside the handler: the failed writer's frames (and its open file, whose
        # space a full disk needs back) are not kept alive by the traceback.
        raise failure
    if kind not in ("weights", "object"):
        check_loadable(path, kind)


_NEARLY_FULL = 1 << 20


class CheckpointWriteError(OSError):
    """A file of a checkpoint could not be written; the save wrote nothing that stays."""

    @classmethod
    def of(cls, stage: str, name: str, error: BaseException) -> CheckpointWriteError:
        """The error for file ``name`` of the checkpoint staged in ``stage``."""
        target = target_of(stage)
        code = getattr(error, "errno", None)
        try:
            free = shutil.disk_usage(stage).free
        except OSError:
            free = -1
        if code is None and 0 <= free < _NEARLY_FULL:
            code = errno.ENOSPC  # torch's stream writer reports no errno
        space = f" ({free} bytes free on that disk)" if free >= 0 else ""
        fix = (
            "Free space on that disk, or save to another folder"
            if code == errno.ENOSPC
            else "Fix the cause and save again"
        )
        return cls(
            code or errno.EIO,
            f"save_state could not write {name!r} of checkpoint {target!r}"
            f"{space}: {getattr(error, 'strerror', None) or error}. What this save wrote was "
            f"removed and earlier checkpoints are untouched. {fix}.",
            os.path.join(stage, name),
        )

    def __str__(self) -> str:
        return str(self.strerror)


def write_snapshot(snapshot: Snapshot, stage: str, safe_serialization: bool) -> None:
    """Write the files of ``snapshot`` into ``stage`` and run its engine jobs."""
    for name, state, kind in snapshot.files:
        write_file(stage, name, state, kind, safe_serialization)
    for job in snapshot.jobs:
        job()

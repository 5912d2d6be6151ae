"""What ``save_state`` writes and ``load_state`` reads, process by process.

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
from typing import TYPE_CHECKING, Any

from ._folders import (
    STAGING_MARKER,
    check_target,
    checkpoints_in,
    commit,
    is_complete,
    prepare_staging,
    recover_replaced,
    remove_staging,
    rotate,
    staging_dir,
    target_of,
)
from ._manifest import FORMAT_VERSION, MANIFEST_NAME, Manifest, check_algorithm
from ._rendezvous import Rendezvous
from ._state_files import (
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
from ._writer_lock import acquire, release

if TYPE_CHECKING:
    from ._parts import CheckpointParts


def is_writer(checkpointer: CheckpointParts) -> bool:
    """Whether this process writes the files shared by all processes."""
    if checkpointer.project_configuration.save_on_each_node:
        return checkpointer.is_local_main_process
    return checkpointer.is_main_process


# --------------------------------------------------------------------------- paths
def resolve_output_dir(
    checkpointer: CheckpointParts, output_dir: str | os.PathLike[str] | None
) -> str:
    """The folder ``save_state`` writes: ``output_dir`` or the next automatic name."""
    config = checkpointer.project_configuration
    if config.automatic_checkpoint_naming:
        if config.project_dir is None:
            raise ValueError(
                "automatic_checkpoint_naming needs a project folder; got project_dir=None. "
                "Pass ProjectConfiguration(project_dir=..., automatic_checkpoint_naming=True)."
            )
        folder = os.path.join(config.project_dir, "checkpoints")
        path = os.path.join(folder, f"checkpoint_{config.iteration}")
        if is_complete(path):
            raise FileExistsError(
                f"automatic checkpoint names are never reused; {path!r} already exists "
                f"(iteration {config.iteration}). Set "
                "checkpointer.project_configuration.iteration to the next free index, or load "
                "the latest checkpoint first (load_state() moves the iteration past it)."
            )
        return path
    if output_dir is None:
        raise ValueError(
            "save_state needs a folder; got output_dir=None without automatic checkpoint "
            "naming. Pass save_state(output_dir=...) or ProjectConfiguration("
            "automatic_checkpoint_naming=True, project_dir=...)."
        )
    return os.path.abspath(os.fspath(output_dir))


LATEST = "latest"
"""``load_state("latest")``: the newest complete checkpoint, or a fresh start when none."""


def latest_checkpoint(checkpointer: CheckpointParts) -> str | None:
    """The newest complete ``checkpoints/checkpoint_<i>`` of the project, or None.

    Raises:
        ValueError: the project has no ``project_dir`` to look in.
        FileExistsError: a folder named ``latest`` exists here, which the keyword would hide.
    """
    if os.path.lexists(LATEST):
        raise FileExistsError(
            f'load_state("latest") loads the newest checkpoint of the project, but a folder '
            f"named 'latest' exists in {os.getcwd()!r} and may be what you meant. Pass "
            "'./latest' to load that folder, or rename it."
        )
    config = checkpointer.project_configuration
    if config.project_dir is None:
        raise ValueError(
            'load_state("latest") looks in <project_dir>/checkpoints; got project_dir=None. '
            "Pass ProjectConfiguration(project_dir=..., automatic_checkpoint_naming=True)."
        )
    folder = os.path.join(config.project_dir, "checkpoints")
    found = checkpoints_in(folder, reference=True)
    return found[-1][1] if found else None


def resolve_input_dir(
    checkpointer: CheckpointParts, input_dir: str | os.PathLike[str] | None
) -> str:
    """The folder ``load_state`` reads: ``input_dir`` or the latest complete checkpoint."""
    if input_dir is not None:
        path = os.path.abspath(os.fspath(input_dir))
        if is_writer(checkpointer):
            recover_replaced(path)
        return path
    config = checkpointer.project_configuration
    if not config.automatic_checkpoint_naming or config.project_dir is None:
        raise ValueError(
            "load_state needs a folder; got input_dir=None without automatic checkpoint "
            "naming. Pass load_state(input_dir=...) or ProjectConfiguration("
            "automatic_checkpoint_naming=True, project_dir=...)."
        )
    folder = os.path.join(config.project_dir, "checkpoints")
    found = checkpoints_in(folder, reference=True)
    if not found:
        raise FileNotFoundError(
            f"load_state() without a folder loads the latest complete checkpoint_<i> in "
            f"{folder!r}; there is none. Save one with save_state() first, or call "
            'load_state("latest"), which starts fresh when there is none.'
        )
    return found[-1][1]


# --------------------------------------------------------------------------- save
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
    stage: str,
    safe_serialization: bool,
    hooks: list[Callable[..., None]],
    copy: Callable[[Any], Any] | None = None,
) -> Snapshot:
    """Run the save hooks and gather this process's states for ``stage``.

    Args:
        checkpointer: The checkpointer of the run (its registry, engine and scaler).
        stage: The staging folder; the hooks and a synchronous sharding engine write into it
            now.
        safe_serialization: Weights as safetensors (else ``torch.save``).
        hooks: The save-state pre-hooks.
        copy: None to write each file as soon as its state is taken (a synchronous save:
            the snapshot comes back empty but for its counts); else the function that copies
            each state to host memory for a later :func:`write_snapshot`, and sharding
            engines snapshot their shards instead of writing them (:attr:`Snapshot.jobs`).
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
    if is_writer(checkpointer):
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
    rank = checkpointer.process_index
    if checkpointer.num_processes > 1:
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
    """Write one file of a snapshot (see :attr:`Snapshot.files`) into ``stage``.

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


@dataclass
class CommitPlan:
    """What the commit of a checkpoint needs, fixed when ``save_state`` is called (an
    asynchronous save commits later, while the run has moved on)."""

    output_dir: str
    writer: bool
    world_size: int
    step: int
    total_limit: int | None
    """``total_limit`` of automatic checkpoint naming (None: no rotation)."""
    checksum: str = "crc32"
    """The checksum the manifest records for each file (``"crc32"``, ``"sha256"``,
    ``"blake2b"``)."""

    @classmethod
    def of(
        cls, checkpointer: CheckpointParts, output_dir: str, step: int, checksum: str = "crc32"
    ) -> CommitPlan:
        """The plan of a save of ``checkpointer``'s objects at training step ``step``."""
        config = checkpointer.project_configuration
        limit = config.total_limit if config.automatic_checkpoint_naming else None
        return cls(
            output_dir=output_dir,
            writer=is_writer(checkpointer),
            world_size=checkpointer.num_processes,
            step=int(step),
            total_limit=limit,
            checksum=check_algorithm(checksum),
        )


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
            named = _named(plan, exc, STAGING_MARKER)  # a full disk names the file it refused
            rendezvous.meet("enter", error=_describe(named))
            if named is exc:
                raise
            raise named from exc
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


def finish_save(
    plan: CommitPlan,
    rendezvous: Rendezvous,
    write: Callable[[], dict[str, Any]],
    poll: bool = False,
) -> None:
    """Run ``write`` (returns the manifest counts), wait until every process has written,
    then commit the manifest and rename (writer), rotate, and meet once more.

    Args:
        plan: The commit settings taken at the call.
        rendezvous: The operation's meeting points.
        write: Writes this process's files into the staging folder.
        poll: Wait for the others by polling the store (from a background thread).
    """
    try:
        _finish_save(plan, rendezvous, write, poll)
    finally:
        if plan.writer:
            release(plan.output_dir)


def _finish_save(
    plan: CommitPlan,
    rendezvous: Rendezvous,
    write: Callable[[], dict[str, Any]],
    poll: bool,
) -> None:
    try:
        counts = write()
    except BaseException as exc:
        error = _named(plan, exc, "an engine's file")
        rendezvous.meet("written", error=_describe(error))
        if plan.writer:
            remove_staging(plan.output_dir)
        if error is exc:
            raise
        raise error from exc
    try:
        rendezvous.meet("written", poll=poll)
    except BaseException:
        if plan.writer:
            remove_staging(plan.output_dir)
        raise
    if plan.writer:
        try:
            manifest = Manifest(
                format_version=FORMAT_VERSION,
                world_size=plan.world_size,
                step=plan.step,
                extra=counts,
            )
            commit(staging_dir(plan.output_dir), plan.output_dir, manifest, plan.checksum)
            if plan.total_limit is not None:
                rotate(os.path.dirname(plan.output_dir), plan.total_limit, keep=plan.output_dir)
        except BaseException as exc:
            remove_staging(plan.output_dir)
            error = _named(plan, exc, MANIFEST_NAME)
            rendezvous.meet("committed", error=_describe(error))
            if error is exc:
                raise
            raise error from exc
    rendezvous.meet("committed", poll=poll)


def save_checkpoint(
    checkpointer: CheckpointParts,
    plan: CommitPlan,
    safe_serialization: bool,
    hooks: list[Callable[..., None]],
) -> str:
    """Write a complete checkpoint to ``plan.output_dir`` on every process, atomically."""
    rendezvous = Rendezvous("save_state")
    stage = open_stage(plan, rendezvous)

    def write() -> dict[str, Any]:
        return take_snapshot(checkpointer, stage, safe_serialization, hooks).counts

    finish_save(plan, rendezvous, write)
    return plan.output_dir


_STORAGE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EFBIG, errno.EROFS}
"""The errors of the storage itself, which an engine's writer or the commit may hit."""


def _named(plan: CommitPlan, exc: BaseException, default: str) -> BaseException:
    """``exc``, or for a storage error (a full disk ...), one that names the checkpoint and
    the file; any other error (a refused target, a clash) keeps its own message."""
    if not isinstance(exc, OSError) or isinstance(exc, CheckpointWriteError):
        return exc
    if exc.errno not in _STORAGE_ERRORS:
        return exc
    stage = staging_dir(plan.output_dir)
    name = os.path.relpath(exc.filename, stage) if isinstance(exc.filename, str) else default
    return CheckpointWriteError.of(stage, name, exc)


def _describe(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"

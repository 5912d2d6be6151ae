"""``load_state`` in two phases, so that a failed load changes nothing.

Phase 1 (`read_checkpoint`) reads and checks every file of the checkpoint without
touching the run: the manifest, each file's size and checksum, every pickle (read with
``weights_only=True`` and held: they are small), the weights files' keys and shapes against the
models (headers only: no second copy of the weights), the optimizers' parameter groups against
the prepared optimizers, the dataloader positions against the loaders' batch sizes, the random
states (tried and put back), and the engine's own layout through its
``validate_model_state`` hook. All processes then agree on the outcome: one process's failure
fails every process, each with an error naming it.

Phase 1 checks content too, not only files: a dataloader position must have the types and
ranges its loader writes and lie within the loader's epoch (``check_state_dict``).

Phase 2 (`apply_checkpoint`) restores the objects. Optimizers, schedulers, the grad
scaler, registered objects, dataloader positions and random states go first, each snapshotted
and put back if a later one refuses its state (the error names the object and its file); every
process then agrees, and only then do the model weights stream in, so a refusal never leaves
the weights changed. What can fail after that is reading the weights (an I/O error: their files
were checked in phase 1), and that error says the models may hold part of them.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..._core._state_files import (
    CUSTOM_NAME,
    OPTIMIZER_NAME,
    RNG_STATE_NAME,
    SAMPLER_NAME,
    SCALER_NAME,
    SCHEDULER_NAME,
    capture_rng_state,
    check_weights,
    indexed_name,
    load_object,
    process_loader_file_name,
    restore_rng_state,
    stateful,
    tied_aliases,
    weights_file_name,
)
from ..._engines._base import LoadedStates
from ..files._folders import checkpoint_index, warn_world_size
from ..files._manifest import (
    Manifest,
    check_digest,
    saved_count,
    verify_file,
)
from ..files._reference_layout import (
    RNG_GLOBALS,
    check_loader_state,
    convert_rng_state,
    is_reference,
    loader_file_name,
    read_any_manifest,
)
from ..files._rendezvous import Rendezvous
from ._state_values import check_optimizer_values, check_scheduler_values

if TYPE_CHECKING:
    import torch

    from ..files._parts import CheckpointParts


class _CheckedFiles:
    """The model and optimizer files of the checkpoint being read, checked as the engine asks
    for them (`CheckpointFiles`)."""

    def __init__(
        self,
        input_dir: str,
        manifest: Manifest,
        read: Callable[[str], Any],
        strict: bool,
        trust_pickles: bool,
    ) -> None:
        self.input_dir, self.manifest, self.read = input_dir, manifest, read
        self.strict, self.trust_pickles = strict, trust_pickles

    def weights(self, index: int, state_dict: Mapping[str, torch.Tensor]) -> str:
        name = weights_file_name(index, True)
        if name not in self.manifest.files:
            name = weights_file_name(index, False)
        path = verify_file(self.input_dir, self.manifest, name, checksum=False)
        # The reference stores tied tensors once and records nothing: the model says which.
        tied = tied_aliases(state_dict) if is_reference(self.manifest) else None
        trust = self.trust_pickles
        check_weights(state_dict, path, strict=self.strict, trust_pickles=trust, tied=tied)
        return path

    def optimizer(
        self, index: int, optimizer: torch.optim.Optimizer
    ) -> tuple[dict[str, object], str]:
        name = indexed_name(OPTIMIZER_NAME, "bin", index)
        state = self.read(name)
        _check_optimizer_state(optimizer, state, index, self.input_dir)
        check_optimizer_values(optimizer, state, name, self.input_dir)
        return state, name


@dataclass
class LoadPlan:
    """Everything phase 1 read and checked, ready to apply."""

    input_dir: str
    manifest: Manifest
    models: list[Any]
    engine_states: LoadedStates = field(default_factory=LoadedStates)
    """The models' and optimizers' files as the engine checked them."""
    states: list[tuple[str, Any, Any, str]] = field(default_factory=list)
    """``(what, object, state, file name)`` for schedulers, scaler, registered objects and
    optimizers."""
    loaders: list[tuple[Any, Any]] = field(default_factory=list)
    rng: Any = None
    trust_pickles: bool = False
    """The user opted in to unrestricted unpickling (``load_state(trust_pickles=True)``)."""


# --------------------------------------------------------------------------- phase 1
def read_checkpoint(
    checkpointer: CheckpointParts,
    input_dir: str,
    hooks: list[Callable[..., None]],
    load_kwargs: dict[str, Any] | None,
    model_kwargs: dict[str, Any],
    verify_checksums: bool,
    trust_pickles: bool = False,
    expected_digest: str | None = None,
) -> LoadPlan:
    """Phase 1: read and check every file this process needs; change nothing.

    No file runs code while it is read unless ``trust_pickles`` (the user opted in by name).
    Load-state pre-hooks run first (they may take models off the list and load them
    themselves; what a hook changes is its own).
    """
    manifest = read_any_manifest(input_dir, expected_digest)
    reference = is_reference(manifest)
    if expected_digest is not None:
        check_digest(input_dir, manifest, expected_digest)
    world = checkpointer.num_processes
    if manifest.world_size != world:
        warn_world_size(manifest, world, input_dir)
    engine = checkpointer.engine
    if reference and not engine.replicated_states:
        raise NotImplementedError(
            f"a checkpoint of HuggingFace accelerate ({input_dir!r}) holds whole model and "
            f"optimizer states, which {type(engine).__name__} does not load (it shards them). "
            "Resume it on one process or with DDP, save_state there, and load that checkpoint."
        )
    models = list(checkpointer.prepared.models)
    for hook in hooks:
        hook(models, input_dir)
    optimizers = list(checkpointer.prepared.optimizers)
    schedulers = stateful(checkpointer.prepared.schedulers)
    loaders = stateful(checkpointer.prepared.dataloaders)
    customs = list(checkpointer.prepared.custom_objects)
    kinds = {"optimizers": optimizers, "schedulers": schedulers, "dataloaders": loaders}
    kinds["custom_objects"] = customs
    if not hooks:
        kinds["models"] = models
    for kind, objects in kinds.items():
        saved = saved_count(manifest, kind, input_dir)
        if saved is not None and saved != len(objects):
            raise ValueError(
                f"load_state restores every object of the saving run into the same slots; "
                f"{input_dir!r} holds {saved} {kind}, this run has {len(objects)}. Prepare (or "
                "register) the same objects, in the same order, as the run that saved it."
            )
    rank = checkpointer.process_index
    own = f"{RNG_STATE_NAME}_{rank}.pkl"
    others = {n for n in manifest.files if n.startswith(f"{RNG_STATE_NAME}_") and n != own}
    for name in sorted(set(manifest.files) - others):
        verify_file(input_dir, manifest, name, checksum=verify_checksums)
    kwargs = dict(load_kwargs or {})

    def read(name: str) -> Any:
        path = verify_file(input_dir, manifest, name, checksum=False)
        return load_object(path, trust_pickles=trust_pickles, **kwargs)

    plan = LoadPlan(input_dir, manifest, models, trust_pickles=trust_pickles)
    for i, loader in enumerate(loaders):
        if reference:
            _plan_reference_loader(plan, loader, i, read)
            continue
        name = process_loader_file_name(i, rank)  # a stateful loader's own state
        if name not in manifest.files:
            name = indexed_name(SAMPLER_NAME, "bin", i)
        state = read(name)
        _check_loader_state(loader, state, i, input_dir, name)
        plan.loaders.append((loader, state))
    strict = bool(model_kwargs.get("strict", True))
    files = _CheckedFiles(input_dir, manifest, read, strict, trust_pickles)
    plan.engine_states = engine.read_checkpoint_states(
        models, optimizers, files, trust_pickles=trust_pickles
    )
    plan.states.extend(plan.engine_states.optimizers)
    for i, scheduler in enumerate(schedulers):
        name = indexed_name(SCHEDULER_NAME, "bin", i)
        state = _mapping(read(name), f"scheduler {i}")
        check_scheduler_values(scheduler, state, name, input_dir)
        plan.states.append((f"scheduler {i}", scheduler, state, name))
    _plan_scaler(checkpointer, plan, read)
    for i, obj in enumerate(customs):
        name = f"{CUSTOM_NAME}_{i}.pkl"
        what = f"registered object {i} ({type(obj).__name__})"
        plan.states.append((what, obj, read(name), name))
    rng_name = f"{RNG_STATE_NAME}_{rank}.pkl"
    if rank < manifest.world_size and reference:
        path = verify_file(input_dir, manifest, rng_name, checksum=False)
        raw = load_object(path, trust_pickles=trust_pickles, allowed_globals=RNG_GLOBALS)
        plan.rng, step = convert_rng_state(raw, rng_name)
        if step is not None:
            manifest.step = step
        _try_rng_state(plan.rng, rng_name)
    elif rank < manifest.world_size:
        plan.rng = read(rng_name)
        _try_rng_state(plan.rng, rng_name)
    return plan


def _plan_reference_loader(
    plan: LoadPlan, loader: Any, index: int, read: Callable[[str], Any]
) -> None:
    """A reference checkpoint holds the state of a stateful loader only (in torchdata's
    form); any other loader is left as it is, as the reference leaves it."""
    name = loader_file_name(index)
    if not getattr(loader, "use_stateful_dataloader", False) or name not in plan.manifest.files:
        return
    state = read(name)
    check_loader_state(state, index, name)
    plan.loaders.append((loader, state))


def _mapping(state: object, what: str) -> Mapping[str, Any]:
    if not isinstance(state, Mapping):
        raise TypeError(
            f"the saved state of {what} must be a dict, as state_dict() returns; the checkpoint "
            f"holds a {type(state).__name__}. The file was replaced: load an earlier checkpoint."
        )
    return state


def _check_loader_state(loader: Any, state: Any, index: int, input_dir: str, name: str) -> None:
    state = _mapping(state, f"dataloader {index}")
    if not {"epoch", "batches_yielded"} <= set(state):
        raise KeyError(
            f"a dataloader position holds 'epoch' and 'batches_yielded'; dataloader {index} in "
            f"{input_dir!r} holds {sorted(state)}. The file was replaced: load an earlier one."
        )
    if state.get("dataloader_state") is not None and not getattr(
        loader, "use_stateful_dataloader", False
    ):
        raise ValueError(
            f"dataloader {index} in {input_dir!r} was saved with its workers' state by a "
            "stateful loader; this run's loader is not stateful. Prepare it with "
            "DataLoaderConfiguration(use_stateful_dataloader=True), as the run that saved it."
        )
    saved, total = state.get("total_batch_size"), getattr(loader, "total_batch_size", None)
    if saved is not None and total is not None and saved != total:
        raise ValueError(
            "a loader can resume mid-epoch only with the same total batch size; saved "
            f"{saved}, this loader has {total}. Resume with the same number of processes and "
            "batch size, or start the epoch again."
        )
    check = getattr(loader, "check_state_dict", None)
    if callable(check):
        try:
            check(state)
        except (TypeError, KeyError, ValueError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else exc
            raise type(exc)(
                f"{name} of checkpoint {input_dir!r} holds a position dataloader {index} "
                f"refuses: {message}"
            ) from None


def _check_optimizer_state(opt: Any, state: Any, index: int, input_dir: str) -> None:
    state = _mapping(state, f"optimizer {index}")
    groups = state.get("param_groups")
    mine = opt.state_dict()["param_groups"]
    ok = isinstance(groups, list) and isinstance(state.get("state"), Mapping)
    ok = ok and len(groups) == len(mine)
    ok = ok and all(
        isinstance(g, Mapping) and len(g.get("params", ())) == len(m["params"])
        for g, m in zip(groups, mine)
    )
    if not ok:
        saved = [len(g.get("params", ())) for g in groups] if isinstance(groups, list) else groups
        raise ValueError(
            f"an optimizer state loads into an optimizer with the same parameter groups; "
            f"optimizer {index} in {input_dir!r} has groups of sizes {saved!r}, this run's has "
            f"{[len(m['params']) for m in mine]}. Prepare the optimizer of the saving run."
        )


def _plan_scaler(checkpointer: CheckpointParts, plan: LoadPlan, read: Callable[[str], Any]) -> None:
    saved = SCALER_NAME in plan.manifest.files
    if checkpointer.scaler is not None and saved:
        state = _mapping(read(SCALER_NAME), "the grad scaler")
        plan.states.append(("the grad scaler", checkpointer.scaler, state, SCALER_NAME))
    elif checkpointer.scaler is not None or saved:
        have = "has" if checkpointer.scaler is not None else "has no"
        warnings.warn(
            f"checkpoint {plan.input_dir!r} {'holds' if saved else 'holds no'} grad scaler state "
            f"and this run {have} grad scaler (mixed_precision={checkpointer.mixed_precision!r}); "
            "the scaler was left as it is.",
            stacklevel=6,  # user code -> Accelerator.load_state -> Checkpointer
        )


def _try_rng_state(state: object, name: str) -> None:
    """Restore ``state`` once and put the current states back: a state that the generators
    refuse fails here, in phase 1."""
    current = capture_rng_state()
    try:
        restore_rng_state(_mapping(state, name))
    except Exception as exc:
        raise ValueError(
            f"random states must be the ones save_state captured; {name} holds states the "
            f"generators refuse ({type(exc).__name__}: {exc}). The file was replaced: load an "
            "earlier checkpoint."
        ) from None
    finally:
        restore_rng_state(current)


# --------------------------------------------------------------------------- phase 2
class StateRefusedError(ValueError):
    """An object refused the state phase 1 read for it; everything restored before it was put
    back."""


def apply_checkpoint(
    checkpointer: CheckpointParts,
    plan: LoadPlan,
    model_kwargs: dict[str, Any],
    rendezvous: Rendezvous,
) -> None:
    """Phase 2: restore every object from ``plan``; on a failure put back what can be.

    The model weights come last, after every other object took its state and every process
    said so: nothing that can refuse its state runs once the weights were written, so a
    failure anywhere before leaves the models as they were (snapshotting the weights to put
    them back would cost a second copy of the model). What can still fail after is reading
    the weights themselves (checked in phase 1: only an I/O error), and that error says so.
    """
    engine = checkpointer.engine
    trust = {"trust_pickles": plan.trust_pickles}
    undo: list[tuple[Any, Any]] = []
    try:
        for what, obj, state, name in plan.states:
            undo.append((obj, obj.state_dict()))
            _restore(obj, state, what, name, plan.input_dir)
        for i, (loader, state) in enumerate(plan.loaders):
            undo.append((loader, loader.state_dict()))
            _restore(loader, state, f"dataloader {i}", "its position file", plan.input_dir)
        if plan.rng is not None:
            undo.append((_RandomStates(), capture_rng_state()))
            restore_rng_state(plan.rng)
    except BaseException as exc:
        _undo(undo, exc)
        rendezvous.meet("restored", error=f"{type(exc).__name__}: {exc}")
        raise
    try:
        rendezvous.meet("restored")
    except BaseException as exc:
        _undo(undo, exc)
        raise
    try:
        if is_reference(plan.manifest):  # keys checked in phase 1, ties included
            model_kwargs = {**model_kwargs, "strict": False}
        engine.apply_checkpoint_states(
            plan.models,
            checkpointer.prepared.optimizers,
            plan.engine_states,
            plan.input_dir,
            **trust,
            **model_kwargs,
        )
    except BaseException as exc:
        _undo(undo, exc)
        rendezvous.meet("applied", error=f"{type(exc).__name__}: {exc}")
        if not isinstance(exc, Exception):
            raise
        raise RuntimeError(
            f"load_state checked every file of {plan.input_dir!r} and restored every other "
            f"state, then reading the model weights failed ({type(exc).__name__}: {exc}). The "
            "other states were put back, but the models may hold part of the checkpoint's "
            "weights: fix the cause (the disk, the file) and call load_state again."
        ) from exc
    rendezvous.meet("applied")
    index = checkpoint_index(plan.input_dir)
    config = checkpointer.project_configuration
    if config.automatic_checkpoint_naming and index is not None:
        config.iteration = index + 1


class _RandomStates:
    """The process's generators as one object with ``load_state_dict``, for the undo list."""

    def load_state_dict(self, state: Any) -> None:
        restore_rng_state(state)


def _restore(obj: Any, state: Any, what: str, name: str, input_dir: str) -> None:
    try:
        obj.load_state_dict(state)
    except Exception as exc:
        raise StateRefusedError(
            f"load_state restores each object from its own file; {what} refused the state in "
            f"{name} of {input_dir!r} ({type(exc).__name__}: {exc}). Nothing was changed: the "
            "objects restored before it were put back. Prepare or register the same objects "
            "as the run that saved it, or load another checkpoint."
        ) from exc


def _undo(undo: list[tuple[Any, Any]], error: BaseException) -> None:
    """Put back the snapshots; warn naming any object that refuses its own snapshot."""
    stuck = []
    for obj, state in reversed(undo):
        try:
            obj.load_state_dict(state)
        except Exception as exc:
            stuck.append(f"{type(obj).__name__} ({type(exc).__name__}: {exc})")
    if stuck:
        warnings.warn(
            f"load_state failed ({type(error).__name__}: {error}) and put back the objects it "
            f"had restored, except {', '.join(stuck)}, which refused their own previous state.",
            stacklevel=6,  # user code -> Accelerator.load_state -> Checkpointer
        )


def load_checkpoint(
    checkpointer: CheckpointParts,
    input_dir: str,
    hooks: list[Callable[..., None]],
    load_kwargs: dict[str, Any] | None,
    model_kwargs: dict[str, Any],
    rendezvous: Rendezvous,
    verify_checksums: bool = True,
    *,
    trust_pickles: bool = False,
    expected_digest: str | None = None,
) -> Manifest:
    """Restore every prepared and registered object from ``input_dir``, all or nothing.

    Raises:
        CheckpointSyncError: on the processes whose own phase succeeded, when another failed.
    """
    try:
        plan = read_checkpoint(
            checkpointer,
            input_dir,
            hooks,
            load_kwargs,
            model_kwargs,
            verify_checksums,
            trust_pickles,
            expected_digest,
        )
    except BaseException as exc:
        rendezvous.meet("validated", error=f"{type(exc).__name__}: {exc}")
        raise
    rendezvous.meet("validated")
    apply_checkpoint(checkpointer, plan, model_kwargs, rendezvous)
    return plan.manifest

"""The reference's functional checkpoint API (``accel.checkpointing``) over accel's own
``save_state`` / ``load_state`` code: the same files, the same manifest, the same checks.

The functions take the objects explicitly instead of an ``Accelerator`` and hand them to a
`Checkpointer` built over them.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from accel_state import PartialState, ProjectConfiguration

from .._core._prepared_objects import PreparedObjects
from .._core._state_files import CUSTOM_NAME, check_loadable, load_object, save_object
from .._core._unwrap import extract_model_from_parallel
from .._engines._base import Engine
from ._checkpointer import Checkpointer
from .save._save_pipeline import save

SAMPLER_NAME = "sampler"
"""The reference's file stem for a data loader's sampler state (``sampler.bin``). accel's
checkpoints write each loader's full state (sampler included) to ``dataloader[_i].bin``
instead."""


class _GivenStates(Engine):
    """The plain engine, with models given either as modules or as their state dicts.

    It only reads and writes the states it is given (no run to place, wrap or step models
    in), so it is built without an `EngineContext`.
    """

    def __init__(self) -> None:
        """Nothing to hold: the checkpoint methods use only their arguments."""

    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        return extract_model_from_parallel(model)

    def model_state_dict(self, model: Any) -> dict[str, Any]:
        if isinstance(model, Mapping):
            return dict(model)
        return super().model_state_dict(model)


def _checkpointer(
    models: list[Any],
    optimizers: list[Any],
    schedulers: list[Any],
    dataloaders: list[Any],
    process_index: int,
    scaler: Any,
    save_on_each_node: bool = False,
) -> Checkpointer:
    """A checkpointer over the given objects, for the functions below.

    Raises:
        ValueError: ``process_index`` is not this process's index.
    """
    state = PartialState()
    if process_index != state.process_index:
        raise ValueError(
            f"process_index must be this process's index ({state.process_index}); got "
            f"{process_index}. Pass PartialState().process_index."
        )
    prepared = PreparedObjects()
    prepared.models.extend(models)
    prepared.optimizers.extend(optimizers)
    prepared.schedulers.extend(schedulers)
    prepared.dataloaders.extend(dataloaders)
    return Checkpointer(
        ProjectConfiguration(save_on_each_node=save_on_each_node),
        prepared,
        _GivenStates(),
        state,
        scaler=scaler,
        mixed_precision="fp16" if scaler is not None else "no",
    )


def save_accelerator_state(
    output_dir: str,
    model_states: list[dict],
    optimizers: list,
    schedulers: list,
    dataloaders: list,
    process_index: int,
    step: int,
    scaler: torch.amp.GradScaler | None = None,
    save_on_each_node: bool = False,
    safe_serialization: bool = True,
) -> Path:
    """Write a checkpoint folder that ``Accelerator.load_state`` and
    `load_accelerator_state` read.

    Call it on every process: the main process (each machine's with ``save_on_each_node``)
    writes the weights, optimizer, scheduler, loader and scaler states, every process its
    random states; the folder appears complete, with its manifest, once all have written.

    Args:
        output_dir: The folder: new, empty, or an earlier checkpoint.
        model_states: One state dict per model (``model.state_dict()``), or the models.
        optimizers: Optimizers (their ``state_dict()`` is saved).
        schedulers: Learning-rate schedulers.
        dataloaders: Data loaders; those with ``state_dict`` (accel's prepared loaders) are
            saved, as ``dataloader[_i].bin``.
        process_index: This process's index (``PartialState().process_index``).
        step: The training step recorded in the manifest; loading gives it back.
        scaler: The fp16 grad scaler, if any.
        save_on_each_node: Write the shared files on every machine.
        safe_serialization: Weights as safetensors (else ``torch.save``).

    Returns:
        The folder written.

    Raises:
        ValueError: ``process_index`` is not this process's index.
    """
    checkpointer = _checkpointer(
        model_states,
        optimizers,
        schedulers,
        dataloaders,
        process_index,
        scaler,
        save_on_each_node=save_on_each_node,
    )
    path = os.path.abspath(os.fspath(output_dir))
    plan = checkpointer.commit_plan(path, step)
    save(checkpointer, plan, safe_serialization, hooks=[])
    return Path(path)


def load_accelerator_state(
    input_dir: str,
    models: list,
    optimizers: list,
    schedulers: list,
    dataloaders: list,
    process_index: int,
    scaler: torch.amp.GradScaler | None = None,
    map_location: Any = None,
    load_kwargs: dict | None = None,
    *,
    trust_pickles: bool = False,
    **load_model_func_kwargs: Any,
) -> dict[str, Any]:
    """Restore objects from a folder written by ``Accelerator.save_state`` or
    `save_accelerator_state`, all or nothing.

    Every file is read and checked (manifest, checksums, keys and shapes) before any object
    changes. The objects must be the saving run's, in the same order.

    Args:
        input_dir: The checkpoint folder.
        models: The models, in the saving order.
        optimizers: The optimizers.
        schedulers: The schedulers.
        dataloaders: The data loaders (those with ``load_state_dict`` are restored).
        process_index: This process's index; it restores its own random states.
        scaler: The fp16 grad scaler, if the saving run had one.
        map_location: Where the non-weight states' tensors go (default: the CPU).
        load_kwargs: More ``torch.load`` arguments for the non-weight files.
        trust_pickles: Unpickle with no restriction (only for a checkpoint you trust);
            without it the files are read with ``weights_only=True``.
        **load_model_func_kwargs: Passed to the weight loader, e.g. ``strict=False``.

    Returns:
        ``{"step": ...}``: the attributes of the saving run to set again.

    Raises:
        ValueError: ``process_index`` is not this process's index, or the folder holds
            other objects than the ones given (registered objects included: a folder saved
            with ``register_for_checkpointing`` objects loads through ``load_state``).
    """
    checkpointer = _checkpointer(models, optimizers, schedulers, dataloaders, process_index, scaler)
    kwargs = dict(load_kwargs or {})
    if map_location is not None:
        kwargs["map_location"] = map_location
    manifest = checkpointer.restore(
        os.path.abspath(os.fspath(input_dir)),
        kwargs,
        dict(load_model_func_kwargs),
        trust_pickles=trust_pickles,
    )
    return {"step": manifest.step}


def _custom_path(path: str | os.PathLike[str], index: int) -> str:
    return os.path.join(os.fspath(path), f"{CUSTOM_NAME}_{index}.pkl")


def save_custom_state(obj: Any, path: str, index: int = 0, save_on_each_node: bool = False) -> None:
    """Write ``obj.state_dict()`` to ``{path}/custom_checkpoint_{index}.pkl`` from the main
    process (each machine's with ``save_on_each_node``), as ``save_state`` does for objects of
    ``register_for_checkpointing``.

    Raises:
        TypeError: the state holds objects that ``load_custom_state`` (reading with
            ``weights_only=True``) could not read back; the file is removed.
    """
    state = PartialState()
    writer = state.is_local_main_process if save_on_each_node else state.is_main_process
    if not writer:
        return
    target = _custom_path(path, index)
    save_object(obj.state_dict(), target)
    try:
        check_loadable(target, f"custom state {index} ({type(obj).__name__})")
    except Exception:
        os.remove(target)
        raise


def load_custom_state(obj: Any, path: str, index: int = 0, *, trust_pickles: bool = False) -> None:
    """Restore ``obj`` from ``{path}/custom_checkpoint_{index}.pkl``.

    The file is read with ``weights_only=True`` unless ``trust_pickles`` (for a file you
    trust).

    Raises:
        UnsafeCheckpointError: the file holds objects outside the allow-list.
    """
    obj.load_state_dict(load_object(_custom_path(path, index), trust_pickles=trust_pickles))

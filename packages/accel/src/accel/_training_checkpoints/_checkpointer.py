"""The training checkpoint as one component: ``save_state`` / ``load_state`` of a run.

A `Checkpointer` is built from its explicit inputs (the project configuration, the
registry of prepared objects, the engine, the processes, the grad scaler) and owns what
belongs to checkpointing alone: the objects registered for it, the save and load pre-hooks,
and the asynchronous save in flight. The ``Accelerator`` delegates to it; the functional API
of ``accel.checkpointing`` builds one from the objects it is given.
"""

from __future__ import annotations

import logging
import os
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from torch.utils.hooks import RemovableHandle

from .files._parts import Processes

# The writer, the loader and their file formats are imported by the first save or load (in
# the methods below), so that building an Accelerator that never checkpoints does not pay
# for them.
if TYPE_CHECKING:
    import torch
    from accel_state import ProjectConfiguration

    from .._core._prepared_objects import PreparedObjects
    from .._engines import Engine
    from .files._manifest import Manifest
    from .save._async_save import AsyncCheckpoint, HostBuffers
    from .save._save_pipeline import CommitPlan

_logger = logging.getLogger("accel.checkpointing")


class Checkpointer:
    """Saves and restores every prepared and registered object of a run.

    Args:
        project_configuration: Where checkpoints go (automatic naming, ``total_limit``,
            ``save_on_each_node``, ``async_save``).
        prepared: The registry of prepared objects; registered objects are added to it.
        engine: The engine that gathers and loads model and optimizer states.
        processes: This process's place in the run.
        scaler: The fp16 grad scaler, saved and restored with the rest (None: none).
        mixed_precision: The run's mixed precision (named when the scaler does not match).
    """

    def __init__(
        self,
        project_configuration: ProjectConfiguration,
        prepared: PreparedObjects,
        engine: Engine,
        processes: Processes,
        *,
        scaler: torch.amp.GradScaler | None = None,
        mixed_precision: str = "no",
    ) -> None:
        self.project_configuration = project_configuration
        self.prepared = prepared
        self.engine = engine
        self.processes = processes
        self.scaler = scaler
        self.mixed_precision = mixed_precision
        self.save_hooks: OrderedDict[int, Callable[..., None]] = OrderedDict()
        """``hook(models, weights, output_dir)`` run by [`save_state`][accel.Accelerator.save_state] before it writes."""
        self.load_hooks: OrderedDict[int, Callable[..., None]] = OrderedDict()
        """``hook(models, input_dir)`` run by [`load_state`][accel.Accelerator.load_state] before it reads."""
        self.pending_save: AsyncCheckpoint | None = None
        """The asynchronous save still writing (or not yet waited for), if any."""
        self.save_buffers: HostBuffers | None = None
        """Host memory of the asynchronous saves, reused by the next one until released."""
        self.prewarm_armed = False
        """Whether the host memory of the first asynchronous save is prepared after the first
        optimizer step (see ``_checkpoint_prewarm``)."""
        self.prewarm_thread: threading.Thread | None = None
        """The thread preparing that memory, once started."""

    # ------------------------------------------------------------- where the process stands
    @property
    def process_index(self) -> int:
        """Global index of this process."""
        return self.processes.process_index

    @property
    def num_processes(self) -> int:
        """Total number of processes."""
        return self.processes.num_processes

    @property
    def is_main_process(self) -> bool:
        """Whether this is the process of global index 0."""
        return self.processes.is_main_process

    @property
    def is_local_main_process(self) -> bool:
        """Whether this is the first process of its machine."""
        return self.processes.is_local_main_process

    @property
    def is_writer(self) -> bool:
        """Whether this process writes the files shared by all processes: the main process,
        or with ``save_on_each_node`` the first process of each machine."""
        if self.project_configuration.save_on_each_node:
            return self.processes.is_local_main_process
        return self.processes.is_main_process

    def commit_plan(self, output_dir: str, step: int, checksum: str = "crc32") -> CommitPlan:
        """The plan of a save to ``output_dir`` at training step ``step``: who writes, where
        this process stands, the rotation, the checksum (fixed now, as an asynchronous save
        commits later, while the run has moved on)."""
        from .save._save_pipeline import CommitPlan

        config = self.project_configuration
        return CommitPlan(
            output_dir=output_dir,
            writer=self.is_writer,
            world_size=self.processes.num_processes,
            rank=self.processes.process_index,
            step=int(step),
            total_limit=config.total_limit if config.automatic_checkpoint_naming else None,
            checksum=checksum,
        )

    # --------------------------------------------------------------------- registration
    def register_for_checkpointing(self, *objects: Any) -> None:
        """Save and restore ``objects`` too (see ``Accelerator.register_for_checkpointing``).

        Raises:
            ValueError: naming every object that lacks ``state_dict`` or ``load_state_dict``.
        """
        invalid = [
            f"\n  - Item at index {i}: {type(obj).__name__}"
            for i, obj in enumerate(objects)
            if not (
                callable(getattr(obj, "state_dict", None))
                and callable(getattr(obj, "load_state_dict", None))
            )
        ]
        if invalid:
            raise ValueError(
                "register_for_checkpointing takes objects with state_dict() and "
                f"load_state_dict() methods; these arguments lack them:{''.join(invalid)}\n"
                "Add both methods, or save those objects yourself."
            )
        self.prepared.add_custom_objects(*objects)

    def register_save_state_pre_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Run ``hook(models, weights, output_dir)`` before [`save_state`][accel.Accelerator.save_state] writes."""
        handle = RemovableHandle(self.save_hooks)
        self.save_hooks[handle.id] = hook
        return handle

    def register_load_state_pre_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Run ``hook(models, input_dir)`` before [`load_state`][accel.Accelerator.load_state] reads."""
        handle = RemovableHandle(self.load_hooks)
        self.load_hooks[handle.id] = hook
        return handle

    # ------------------------------------------------------------------------- save
    def save_state(
        self,
        output_dir: str | os.PathLike[str] | None,
        safe_serialization: bool = True,
        *,
        step: int,
        async_save: bool | None = None,
        checksum: str = "crc32",
        **save_model_func_kwargs: Any,
    ) -> Any:
        """Write a checkpoint of the run at training step ``step``, on every process.

        The steps, in order: refuse extra writer arguments; wait for the save in flight; pick
        the folder (``output_dir`` or the next automatic name); fix what the commit needs;
        then either copy every state to host memory and write on a background thread
        (asynchronous), or write now; finally move the automatic name on. Writing means: the
        writer checks the target and opens a staging folder, every process writes its share
        into it, and the writer commits the manifest and renames it (see ``_save_pipeline``).

        Returns:
            The folder written, or the `AsyncCheckpoint` of an asynchronous save.
        """
        if save_model_func_kwargs:
            raise TypeError(
                "save_state passes no extra arguments to the weight writer of this engine; got "
                f"{sorted(save_model_func_kwargs)}. Remove them."
            )
        from .files._save_paths import resolve_output_dir
        from .save._async_save import HostBuffers
        from .save._save_pipeline import save

        if async_save is None:
            async_save = self.project_configuration.async_save
        self.wait_for_pending_save()
        path = resolve_output_dir(self, output_dir)
        hooks = list(self.save_hooks.values())
        plan = self.commit_plan(path, step, checksum)
        result: Any
        if async_save:
            if self.prewarm_thread is not None:
                self.prewarm_thread.join()  # its buffers are this save's
            if self.save_buffers is None:
                self.save_buffers = HostBuffers()
            result = self.pending_save = save(
                self, plan, safe_serialization, hooks, self.save_buffers
            )
        else:
            result = save(self, plan, safe_serialization, hooks)
        if self.project_configuration.automatic_checkpoint_naming:
            self.project_configuration.iteration += 1
        return result

    def wait_for_pending_save(self, release: bool = False) -> None:
        """Wait for the asynchronous save in flight; raise its error if it failed (once).

        Args:
            release: Also drop the host memory kept for the next asynchronous save.
        """
        pending, self.pending_save = self.pending_save, None
        if release:
            self.save_buffers = None
        if pending is not None and not pending._reported:
            pending.wait()

    # ------------------------------------------------------------------------- load
    def load_state(
        self,
        input_dir: str | os.PathLike[str] | None,
        load_kwargs: dict[str, Any] | None = None,
        *,
        trust_pickles: bool = False,
        verify_checksums: bool = True,
        expected_digest: str | None = None,
        **load_model_func_kwargs: Any,
    ) -> int | None:
        """Restore everything [`save_state`][accel.Accelerator.save_state] saved, all or nothing, on every process.

        Returns:
            The training step the checkpoint recorded, or None when ``input_dir`` is
            ``"latest"`` and the project has no checkpoint yet (nothing was loaded).
        """
        from .files._rendezvous import Rendezvous
        from .files._save_paths import LATEST, latest_checkpoint, resolve_input_dir
        from .load._load import load_checkpoint

        self.wait_for_pending_save()
        rendezvous = Rendezvous("load_state")
        latest = isinstance(input_dir, str) and input_dir == LATEST
        try:
            path = latest_checkpoint(self) if latest else resolve_input_dir(self, input_dir)
        except Exception as exc:
            rendezvous.meet("enter", error=f"{type(exc).__name__}: {exc}")
            raise
        chosen = rendezvous.meet("enter", payload=path or "")
        if input_dir is None or latest:
            path = chosen[0]  # every process loads the checkpoint the main process found
        if not path:
            folder = os.path.join(str(self.project_configuration.project_dir), "checkpoints")
            if self.is_main_process:
                _logger.warning(
                    "load_state('latest'): no complete checkpoint in %s; starting fresh.", folder
                )
            return None
        hooks = list(self.load_hooks.values())
        manifest = load_checkpoint(
            self,
            path,
            hooks,
            load_kwargs,
            load_model_func_kwargs,
            rendezvous,
            verify_checksums,
            trust_pickles=trust_pickles,
            expected_digest=expected_digest,
        )
        return manifest.step

    def restore(
        self,
        path: str,
        load_kwargs: dict[str, Any] | None,
        model_kwargs: dict[str, Any],
        *,
        trust_pickles: bool = False,
    ) -> Manifest:
        """Load the checkpoint folder ``path`` (already chosen; no load hooks, checksums
        verified), all or nothing, on every process: the functional ``load_accelerator_state``.

        Returns:
            The checkpoint's manifest.
        """
        from .files._rendezvous import Rendezvous
        from .load._load import load_checkpoint

        rendezvous = Rendezvous("load_state")
        return load_checkpoint(
            self, path, [], load_kwargs, model_kwargs, rendezvous, trust_pickles=trust_pickles
        )

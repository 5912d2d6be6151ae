"""``save_state`` / ``load_state``, their hooks, ``save_model``, ``save`` and ``get_state_dict``."""

from __future__ import annotations

import logging
import os
from collections import OrderedDict
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Union

import torch
from torch.utils.hooks import RemovableHandle

from ._checkpoint_async import AsyncCheckpoint, HostBuffers, start_async_save
from ._checkpoint_load import load_checkpoint
from ._checkpoint_sync import Rendezvous
from ._checkpointing import (
    LATEST,
    latest_checkpoint,
    resolve_input_dir,
    resolve_output_dir,
    save_checkpoint,
)
from ._save_model import save, save_model_files

if TYPE_CHECKING:
    from ._accelerator import Accelerator

_logger = logging.getLogger("accel.checkpointing")


class CheckpointingMixin:
    """Methods that save and restore a training run."""

    _save_model_state_pre_hook: dict[Any, Any]
    _load_model_state_pre_hook: dict[Any, Any]
    _pending_save: AsyncCheckpoint | None = None
    """The asynchronous save still writing (or not yet waited for), if any."""
    _save_buffers: HostBuffers | None = None
    """Host memory of the asynchronous saves, reused by the next one until end_training."""

    # --------------------------------------------------------------------- registration
    def register_for_checkpointing(self: Accelerator, *objects: Any) -> None:
        """Save and restore ``objects`` with :meth:`save_state` / :meth:`load_state`.

        Each object needs ``state_dict()`` and ``load_state_dict(state)``; its state is saved by
        the main process, in registration order, and must hold only tensors, numbers, strings
        and containers of them (what ``torch.load(weights_only=True)`` reads back).

        Raises:
            ValueError: naming every object that lacks one of the two methods.
        """
        invalid = [
            f"#{i} ({type(obj).__name__})"
            for i, obj in enumerate(objects)
            if not (
                callable(getattr(obj, "state_dict", None))
                and callable(getattr(obj, "load_state_dict", None))
            )
        ]
        if invalid:
            raise ValueError(
                "register_for_checkpointing takes objects with state_dict() and "
                f"load_state_dict() methods; objects {', '.join(invalid)} lack them. Add both "
                "methods, or save those objects yourself."
            )
        self._prepared.add_custom_objects(*objects)

    def register_save_state_pre_hook(
        self: Accelerator, hook: Callable[..., None]
    ) -> RemovableHandle:
        """Run ``hook(models, weights, output_dir)`` in :meth:`save_state` before it writes.

        ``models`` are the prepared models, ``weights`` their state dicts; removing an entry of
        ``weights`` means its model file is not written (the hook saved it itself).
        ``output_dir`` is the folder being written (a staging folder renamed to the final name
        when complete), so files the hook writes there become part of the checkpoint.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        if not isinstance(self._save_model_state_pre_hook, OrderedDict):
            # RemovableHandle keeps a weak reference, which a plain dict does not support.
            self._save_model_state_pre_hook = OrderedDict(self._save_model_state_pre_hook)
        handle = RemovableHandle(self._save_model_state_pre_hook)
        self._save_model_state_pre_hook[handle.id] = hook
        return handle

    def register_load_state_pre_hook(
        self: Accelerator, hook: Callable[..., None]
    ) -> RemovableHandle:
        """Run ``hook(models, input_dir)`` in :meth:`load_state` before it reads.

        Removing an entry of ``models`` means that model is not loaded (the hook loaded it).

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        if not isinstance(self._load_model_state_pre_hook, OrderedDict):
            self._load_model_state_pre_hook = OrderedDict(self._load_model_state_pre_hook)
        handle = RemovableHandle(self._load_model_state_pre_hook)
        self._load_model_state_pre_hook[handle.id] = hook
        return handle

    # ------------------------------------------------------------------- save / load
    def save_state(
        self: Accelerator,
        output_dir: str | os.PathLike[str] | None = None,
        safe_serialization: bool = True,
        *,
        async_save: bool | None = None,
        **save_model_func_kwargs: Any,
    ) -> Any:
        """Save models, optimizers, schedulers, grad scaler, dataloader positions, random
        states, ``step`` and registered objects to a folder.

        Call it on every process: each writes its share, and the folder appears, complete,
        only when all have finished (it is written under a hidden ``.partial`` name first). A
        call on some processes only fails after ``ACCEL_CHECKPOINT_TIMEOUT`` seconds (600)
        with an error instead of hanging. With ``automatic_checkpoint_naming`` the folder is
        ``<project_dir>/checkpoints/checkpoint_<iteration>`` and ``total_limit`` deletes the
        oldest complete checkpoints once the new one is complete. The manifest records
        each file's size and CRC-32 checksum, which :meth:`load_state` verifies.

        Args:
            output_dir: The folder (ignored with automatic checkpoint naming). It must be new,
                empty, or an earlier checkpoint: the files accel wrote there are replaced and
                any other file or folder in it (e.g. ``eval_results.json``) is kept. A regular
                file, a symlink or a folder of other files is refused before anything is
                written.
            safe_serialization: Write weights as safetensors (else ``torch.save``).
            async_save: Copy every state to host memory now and write the files on a
                background thread while training goes on (None: the project configuration's
                ``async_save``). The checkpoint is committed (manifest and rename) only once
                every process has written its files, so a crash during the write keeps the
                previous checkpoint. Memory cost: one host copy of what this process writes
                (the main process holds the full weights and optimizer state with one process
                or DDP; each process its shards with FSDP), kept after the commit for the next
                asynchronous save until ``end_training``. The
                next ``save_state``, ``load_state`` and ``end_training`` wait for it, and so
                does the interpreter's exit; ``wait_for_everyone`` does not. DeepSpeed
                engines refuse it.
            **save_model_func_kwargs: Not used by this engine; rejected when given.

        Returns:
            The folder written; with ``async_save``, an :class:`AsyncCheckpoint` handle
            (``.path``, ``.wait()``, ``.done()``, ``.exception()``) whose ``wait()`` raises
            ``AsyncSaveError`` naming the checkpoint if the background write failed.
        """
        if save_model_func_kwargs:
            raise TypeError(
                "save_state passes no extra arguments to the weight writer of this engine; got "
                f"{sorted(save_model_func_kwargs)}. Remove them."
            )
        if async_save is None:
            async_save = self.project_configuration.async_save
        self._wait_for_pending_save()
        path = resolve_output_dir(self, output_dir)
        hooks = list(self._save_model_state_pre_hook.values())
        result: Any = path
        if async_save:
            if self._save_buffers is None:
                self._save_buffers = HostBuffers()
            result = self._pending_save = start_async_save(
                self, path, safe_serialization, hooks, self._save_buffers
            )
        else:
            save_checkpoint(self, path, safe_serialization, hooks)
        if self.project_configuration.automatic_checkpoint_naming:
            self.project_configuration.iteration += 1
        return result

    def _wait_for_pending_save(self: Accelerator, release: bool = False) -> None:
        """Wait for the asynchronous save in flight; raise its error if it failed (once).

        Args:
            release: Also drop the host memory kept for the next asynchronous save.
        """
        pending, self._pending_save = self._pending_save, None
        if release:
            self._save_buffers = None
        if pending is not None and not pending._reported:
            pending.wait()

    def load_state(
        self: Accelerator,
        input_dir: str | os.PathLike[str] | None = None,
        load_kwargs: dict[str, Any] | None = None,
        *,
        trust_pickles: bool = False,
        verify_checksums: bool = True,
        **load_model_func_kwargs: Any,
    ) -> None:
        """Restore everything :meth:`save_state` saved, so training continues exactly.

        Prepared dataloaders continue mid-epoch from the saved position (no
        ``skip_first_batches`` needed), and each process gets its random states back. Call it
        on every process, after ``prepare`` and ``register_for_checkpointing``, with the same
        objects in the same order as the saving run.

        The load is all or nothing: every file is read and checked first (manifest, sizes,
        checksums, pickles read with ``weights_only=True``, weights' keys and shapes, the
        engine's own files), on every process, before any object changes; if one check fails
        on any process, every process raises and the run is left exactly as it was. Files of
        the folder that ``save_state`` did not write are ignored.

        A checkpoint saved by a different number of processes loads models, optimizers,
        schedulers, scaler and registered objects in full; processes whose index is in the
        checkpoint restore their random states and the others keep theirs; dataloaders resume
        mid-epoch only if their total batch size is unchanged (else a clear error).

        Args:
            input_dir: The folder; None loads the latest complete
                ``checkpoints/checkpoint_<i>`` of the project (automatic naming) and fails
                when there is none. ``"latest"`` loads that same newest complete checkpoint
                of ``<project_dir>/checkpoints`` and, when there is none, logs a warning and
                returns with nothing changed (a fresh start): one line that makes a script
                resume after a restart.
            load_kwargs: Extra ``torch.load`` arguments for non-weight files (they are read
                with ``weights_only=True`` unless ``trust_pickles``).
            trust_pickles: Unpickle the checkpoint's files with no restriction. Without it no
                file runs code while it loads: torch pickles are read with
                ``torch.load(weights_only=True)``, DeepSpeed's files are checked that way before
                DeepSpeed reads them, and ``torch.distributed.checkpoint`` metadata goes through
                a reader that builds only its own classes; anything else is refused with an
                error naming the file. Pass True only for a checkpoint you trust.
            verify_checksums: Check each file against the CRC-32 checksum recorded when it was
                saved (reads every file once more, at about 2 GB/s). False checks sizes only.
            **load_model_func_kwargs: Passed to the model loader, e.g. ``strict=False``.

        Raises:
            accel_bigmodel.UntrustedPickleError: a file names a global outside the allow-list
                (refused without running it).
        """
        self._wait_for_pending_save()
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
            return
        hooks = list(self._load_model_state_pre_hook.values())
        load_checkpoint(
            self,
            path,
            hooks,
            load_kwargs,
            load_model_func_kwargs,
            rendezvous,
            verify_checksums,
            trust_pickles=trust_pickles,
        )

    # ----------------------------------------------------------------- model weights
    def get_state_dict(self: Accelerator, model: torch.nn.Module, unwrap: bool = True) -> dict:
        """State dict of a prepared model, keyed as in the user's module when ``unwrap``."""
        if unwrap:
            return self.engine.model_state_dict(model)
        return model.state_dict()

    def save_model(
        self: Accelerator,
        model: torch.nn.Module,
        save_directory: str | os.PathLike[str],
        max_shard_size: Union[int, str] = "10GB",
        safe_serialization: bool = True,
    ) -> None:
        """Save a model's weights to a folder that ``load_checkpoint_in_model`` reads.

        One ``model.safetensors`` (``pytorch_model.bin`` without ``safe_serialization``), or
        shards of at most ``max_shard_size`` plus ``model.safetensors.index.json``. Tied
        weights are stored once. Call it on every process; the main process writes.
        """
        state_dict = self.get_state_dict(model)
        save_model_files(
            state_dict,
            save_directory,
            max_shard_size=max_shard_size,
            safe_serialization=safe_serialization,
            save_on_each_node=self.project_configuration.save_on_each_node,
        )

    def save(self: Accelerator, obj: Any, f: Any, safe_serialization: bool = False) -> None:
        """Save ``obj`` to ``f`` once per job (once per machine with ``save_on_each_node``)."""
        save(
            obj,
            f,
            save_on_each_node=self.project_configuration.save_on_each_node,
            safe_serialization=safe_serialization,
        )

"""``save_state`` / ``load_state``, their hooks, ``save_model``, ``save`` and ``get_state_dict``.

The checkpoint itself is the `Checkpointer` component; these methods are the facade's
documented entry points and delegate to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any, Union

import torch
from torch.utils.hooks import RemovableHandle

from ._fields import AcceleratorCore


class CheckpointingMixin(AcceleratorCore):
    """Methods that save and restore a training run."""

    # --------------------------------------------------------------------- registration
    def register_for_checkpointing(self, *objects: Any) -> None:
        """Save and restore ``objects`` with [`save_state`][accel.Accelerator.save_state] / [`load_state`][accel.Accelerator.load_state].

        Each object needs ``state_dict()`` and ``load_state_dict(state)``; its state is saved by
        the main process, in registration order, and must hold only tensors, numbers, strings
        and containers of them (what ``torch.load(weights_only=True)`` reads back).

        Raises:
            ValueError: naming every object that lacks one of the two methods.
        """
        self._checkpointer.register_for_checkpointing(*objects)

    def register_save_state_pre_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Run ``hook(models, weights, output_dir)`` in [`save_state`][accel.Accelerator.save_state] before it writes.

        ``models`` are the prepared models, ``weights`` their state dicts; removing an entry of
        ``weights`` means its model file is not written (the hook saved it itself).
        ``output_dir`` is the folder being written (a staging folder renamed to the final name
        when complete), so files the hook writes there become part of the checkpoint.

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return self._checkpointer.register_save_state_pre_hook(hook)

    def register_load_state_pre_hook(self, hook: Callable[..., None]) -> RemovableHandle:
        """Run ``hook(models, input_dir)`` in [`load_state`][accel.Accelerator.load_state] before it reads.

        Removing an entry of ``models`` means that model is not loaded (the hook loaded it).

        Returns:
            A handle whose ``remove()`` unregisters the hook.
        """
        return self._checkpointer.register_load_state_pre_hook(hook)

    # ------------------------------------------------------------------- save / load
    def save_state(
        self,
        output_dir: str | os.PathLike[str] | None = None,
        safe_serialization: bool = True,
        *,
        async_save: bool | None = None,
        checksum: str = "crc32",
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
        each file's size and CRC-32 checksum, which [`load_state`][accel.Accelerator.load_state] verifies.

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
            checksum: The checksum the manifest records for each file: ``"crc32"`` (the
                default: catches disk and copy errors, not a forger, who can make a file
                match it), ``"sha256"`` or ``"blake2b"`` (resist forgery; a file is hashed on
                one thread, see ``benchmarks/results/checkpoint_integrity.md`` for the cost).
                A strong checksum protects only with the manifest pinned: record
                ``accel.utils.checkpoint_digest(folder)`` where only you can write and pass it
                to ``load_state(..., expected_digest=...)``.
            **save_model_func_kwargs: Not used by this engine; rejected when given.

        Returns:
            The folder written; with ``async_save``, an `AsyncCheckpoint` handle
            (``.path``, ``.wait()``, ``.done()``, ``.exception()``) whose ``wait()`` raises
            ``AsyncSaveError`` naming the checkpoint if the background write failed.
        """
        return self._checkpointer.save_state(
            output_dir,
            safe_serialization,
            step=self.step,
            async_save=async_save,
            checksum=checksum,
            **save_model_func_kwargs,
        )

    def load_state(
        self,
        input_dir: str | os.PathLike[str] | None = None,
        load_kwargs: dict[str, Any] | None = None,
        *,
        trust_pickles: bool = False,
        verify_checksums: bool = True,
        expected_digest: str | None = None,
        **load_model_func_kwargs: Any,
    ) -> None:
        """Restore everything [`save_state`][accel.Accelerator.save_state] saved, so training continues exactly.

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
                The checksums are CRC-32 unless the checkpoint was saved with
                ``checksum="sha256"`` or ``"blake2b"``: CRC-32 catches accidents, not a
                forger.
            expected_digest: The manifest digest recorded when the checkpoint was saved
                (``accel.utils.checkpoint_digest``): the load is refused unless the manifest
                has it and every file has a cryptographic checksum, so a checkpoint kept in
                shared storage cannot be swapped for a forged one.
            **load_model_func_kwargs: Passed to the model loader, e.g. ``strict=False``.

        Raises:
            accel_bigmodel.UntrustedPickleError: a file names a global outside the allow-list
                (refused without running it).
        """
        step = self._checkpointer.load_state(
            input_dir,
            load_kwargs,
            trust_pickles=trust_pickles,
            verify_checksums=verify_checksums,
            expected_digest=expected_digest,
            **load_model_func_kwargs,
        )
        if step is not None:
            self.step = step

    # ----------------------------------------------------------------- model weights
    def get_state_dict(self, model: torch.nn.Module, unwrap: bool = True) -> dict:
        """State dict of a prepared model, keyed as in the user's module when ``unwrap``."""
        if unwrap:
            return self.engine.model_state_dict(model)
        return model.state_dict()

    def save_model(
        self,
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
        from .._training_checkpoints._model_weights import save_model_files  # first save only

        state_dict = self.get_state_dict(model)
        save_model_files(
            state_dict,
            save_directory,
            max_shard_size=max_shard_size,
            safe_serialization=safe_serialization,
            save_on_each_node=self.project_configuration.save_on_each_node,
        )

    def save(self, obj: Any, f: Any, safe_serialization: bool = False) -> None:
        """Save ``obj`` to ``f`` once per job (once per machine with ``save_on_each_node``)."""
        from .._training_checkpoints._model_weights import save  # first save only

        save(
            obj,
            f,
            save_on_each_node=self.project_configuration.save_on_each_node,
            safe_serialization=safe_serialization,
        )

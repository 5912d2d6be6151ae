"""What an ``Accelerator`` tells about its run: processes, device, precision, plugins, the
parallel ranks, the data settings, accumulation and the project's folders, read from the state,
the engine and the settings it was built with."""

from __future__ import annotations

from typing import Any

import torch
from accel_state import (
    AutocastKwargs,
    DistributedDataParallelKwargs,
    DistributedType,
    GradScalerKwargs,
    InitProcessGroupKwargs,
    ProfileKwargs,
)

from ._fields import AcceleratorCore, fp8_backend_of


class StateViewMixin(AcceleratorCore):
    """The read-only (and a few settable) properties of an ``Accelerator``."""

    # The registry's lists under the reference's private names, which scripts written for the
    # reference read (``accelerator._models``); the registry stays their only owner.
    _models = property(lambda self: self._prepared.models)
    _optimizers = property(lambda self: self._prepared.optimizers)
    _schedulers = property(lambda self: self._prepared.schedulers)
    _dataloaders = property(lambda self: self._prepared.dataloaders)
    _custom_objects = property(lambda self: self._prepared.custom_objects)

    @property
    def device(self) -> torch.device:
        """The device of this process."""
        return self.state.device

    @property
    def distributed_type(self) -> DistributedType:
        """The kind of distributed run."""
        return self.state.distributed_type

    @property
    def num_processes(self) -> int:
        """Total number of processes."""
        return self.state.num_processes

    @property
    def process_index(self) -> int:
        """Global index of this process."""
        return self.state.process_index

    @property
    def local_process_index(self) -> int:
        """Index of this process on its machine."""
        return self.state.local_process_index

    @property
    def is_main_process(self) -> bool:
        """Whether this is the process of global index 0."""
        return self.state.is_main_process

    @property
    def is_local_main_process(self) -> bool:
        """Whether this is the first process of its machine."""
        return self.state.is_local_main_process

    @property
    def is_last_process(self) -> bool:
        """Whether this is the last process."""
        return self.state.is_last_process

    @property
    def use_distributed(self) -> bool:
        """Whether more than one process takes part."""
        return self.state.use_distributed

    @property
    def mixed_precision(self) -> str:
        """``"no"``, ``"fp16"``, ``"bf16"`` or ``"fp8"``."""
        return self.state.mixed_precision

    @property
    def fp8_backend(self) -> str:
        """FP8 engine of the run: ``"AO"`` (torchao), ``"TE"``, ``"MSAMP"``, or ``"NO"``."""
        return fp8_backend_of(self.fp8_recipe_handler)

    # The reference's handler attributes: the kwargs handler of each kind that was passed.
    ddp_handler = property(lambda self: self._handler(DistributedDataParallelKwargs))
    scaler_handler = property(lambda self: self._handler(GradScalerKwargs))
    init_handler = property(lambda self: self._handler(InitProcessGroupKwargs))
    autocast_handler = property(lambda self: self._handler(AutocastKwargs))
    profile_handler = property(lambda self: self._handler(ProfileKwargs))
    te_recipe_handler = property(lambda self: _recipe_of(self, "TERecipeKwargs"))
    ao_recipe_handler = property(lambda self: _recipe_of(self, "AORecipeKwargs"))
    msamp_recipe_handler = property(lambda self: _recipe_of(self, "MSAMPRecipeKwargs"))

    @property
    def has_fp8_handler(self) -> bool:
        """Whether an FP8 recipe was passed in ``kwargs_handlers``."""
        return any(type(h).__name__ in _FP8_RECIPES for h in self._handlers.values())

    @property
    def delayed_fp8_autocast(self) -> bool:
        """Whether the FP8 autocast wraps the engine's wrapper (DDP / FSDP) rather than the
        model's own forward: never in accel, which puts every autocast, FP8 included, inside
        the model's forward before the engine wraps it."""
        return False

    @property
    def fp8_enabled(self) -> bool:
        """Whether the run computes in FP8 (``mixed_precision="fp8"``)."""
        return self.mixed_precision == "fp8"

    @property
    def deepspeed_plugin(self) -> Any:
        """The active ``DeepSpeedPlugin`` (None without DeepSpeed)."""
        return self.state.deepspeed_plugin

    @property
    def is_fsdp2(self) -> bool:
        """Whether models are sharded with FSDP2 (``fully_shard``)."""
        return self.state.is_fsdp2

    @property
    def is_composable_parallelism_enabled(self) -> bool:
        """Whether FSDP2 composes with the other parallelisms of ``parallelism_config``."""
        return self.is_fsdp2

    @property
    def multi_device(self) -> bool:
        """Whether several accelerator devices (GPUs, XPUs ...) train together; False on CPU."""
        return self.use_distributed and self.distributed_type in _MULTI_DEVICE

    @property
    def torch_device_mesh(self) -> Any:
        """The ``DeviceMesh`` of ``parallelism_config`` once the engine has built it, else None."""
        return self.state.device_mesh

    @property
    def should_save_model(self) -> bool:
        """Whether this process takes part in saving the model (every process does: sharded
        and replicated saves are coordinated by ``save_model`` / ``save_state``)."""
        return True

    @property
    def use_stateful_dataloader(self) -> bool:
        """Whether prepared dataloaders are ``torchdata`` stateful loaders."""
        return bool(getattr(self.dataloader_config, "use_stateful_dataloader", False))

    @property
    def has_lomo_optimizer(self) -> bool:
        """Whether a LOMO optimizer (``lomo_optim.Lomo`` / ``AdaLomo``) was prepared."""
        inner = (getattr(opt, "optimizer", opt) for opt in self._prepared.optimizers)
        return any(type(opt).__name__ in ("Lomo", "AdaLomo") for opt in inner)

    def _mesh_rank(self, dim: str, what: str) -> int:
        config = self.parallelism_config
        if config is None:
            raise RuntimeError(
                f"{what} needs a ParallelismConfig; got parallelism_config=None. Pass "
                "Accelerator(parallelism_config=ParallelismConfig(...))."
            )
        config.validate(self.num_processes)
        return config.local_rank(dim, self.process_index)

    @property
    def data_parallel_rank(self) -> int:
        """Index of this process's replica (``dp_replicate`` mesh coordinate)."""
        return self._mesh_rank("dp_replicate", "data_parallel_rank")

    @property
    def data_parallel_shard_rank(self) -> int:
        """Index of this process within its replica's shards (``dp_shard`` coordinate)."""
        return self._mesh_rank("dp_shard", "data_parallel_shard_rank")

    @property
    def tensor_parallel_rank(self) -> int:
        """Index of this process within its tensor-parallel group (``tp`` coordinate)."""
        return self._mesh_rank("tp", "tensor_parallel_rank")

    @property
    def context_parallel_rank(self) -> int:
        """Index of this process within its context-parallel group (``cp`` coordinate)."""
        return self._mesh_rank("cp", "context_parallel_rank")

    @property
    def pipeline_parallel_rank(self) -> int:
        """Not available: ``ParallelismConfig`` has no pipeline dimension."""
        raise NotImplementedError(
            "pipeline_parallel_rank needs a pipeline dimension, which ParallelismConfig does not "
            "have; got a request for it. Pipeline stages come from accel.prepare_pippy: use "
            "PartialState().process_index to find this process's stage."
        )

    @property
    def split_batches(self) -> bool:
        """Whether each batch of a prepared loader is split between the processes."""
        return self.dataloader_config.split_batches

    @property
    def dispatch_batches(self) -> bool | None:
        """Whether the main process reads batches and sends each process its part."""
        return self.dataloader_config.dispatch_batches

    @property
    def even_batches(self) -> bool:
        """Whether every process gets the same number of batches."""
        return self.dataloader_config.even_batches

    @even_batches.setter
    def even_batches(self, value: bool) -> None:
        self.dataloader_config.even_batches = value

    @property
    def use_seedable_sampler(self) -> bool:
        """Whether prepared loaders shuffle with a seedable sampler."""
        return self.dataloader_config.use_seedable_sampler

    @property
    def non_blocking(self) -> bool:
        """Whether batches move to the device without blocking."""
        return self.dataloader_config.non_blocking

    @property
    def gradient_accumulation_steps(self) -> int:
        """Batches accumulated per optimizer step."""
        return self.gradient_state.num_steps

    @gradient_accumulation_steps.setter
    def gradient_accumulation_steps(self, steps: int) -> None:
        self.gradient_state.plugin_kwargs.update({"num_steps": steps})

    @property
    def sync_gradients(self) -> bool:
        """Whether the current step synchronises gradients (ends an accumulation cycle)."""
        return self.gradient_state.sync_gradients

    @sync_gradients.setter
    def sync_gradients(self, value: bool) -> None:
        self.gradient_state._set_sync_gradients(value)

    @property
    def optimizer_step_was_skipped(self) -> bool:
        """Whether any prepared optimizer skipped its last step (fp16 overflow)."""
        return any(opt.step_was_skipped for opt in self._prepared.optimizers)

    @property
    def project_dir(self) -> str | None:
        """Folder of the project."""
        return self.project_configuration.project_dir

    @property
    def logging_dir(self) -> str | None:
        """Folder of tracker logs."""
        return self.project_configuration.logging_dir

    @property
    def save_iteration(self) -> int:
        """Index of the next automatically named checkpoint."""
        return self.project_configuration.iteration


_FP8_RECIPES = ("AORecipeKwargs", "TERecipeKwargs", "MSAMPRecipeKwargs", "FP8RecipeKwargs")
_MULTI_DEVICE = tuple(
    t for t in DistributedType if t.value.startswith("MULTI_") and t.value != "MULTI_CPU"
)


def _recipe_of(accelerator: AcceleratorCore, kind: str) -> Any:
    """The FP8 recipe the run uses when it is of class ``kind``, else None."""
    recipe = accelerator.fp8_recipe_handler
    return recipe if type(recipe).__name__ == kind else None

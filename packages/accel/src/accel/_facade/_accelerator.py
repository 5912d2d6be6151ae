"""The ``Accelerator`` facade: wires state, data, precision, collectives and engines together."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Union

import torch
from accel_state import (
    AcceleratorState,
    AutocastKwargs,
    DistributedDataParallelKwargs,
    DistributedType,
    GradientAccumulationPlugin,
    GradientState,
    GradScalerKwargs,
    InitProcessGroupKwargs,
    KwargsHandler,
    ProfileKwargs,
    ProjectConfiguration,
    TorchDynamoPlugin,
    unsupported_distributed_type,
)
from accel_state import environment_variables as env

from .._checkpoint._checkpointer import Checkpointer
from .._engines import EngineContext, engine_class
from .._engines._deepspeed import resolve_deepspeed_plugins
from .._engines._fsdp import resolve_parallel_plugins, shards_data
from .._engines._megatron import megatron_runs_distributed, resolve_megatron_plugin
from ._fields import fp8_backend_of
from ._operations import OpsMixin
from ._prepare import PrepareMixin
from ._registry import PreparedObjects
from ._saving import CheckpointingMixin
from ._tracking import TrackingMixin
from ._training import TrainingMixin

if TYPE_CHECKING:
    from accel_data import DataLoaderConfiguration
    from accel_state import (
        DeepSpeedPlugin,
        FullyShardedDataParallelPlugin,
        ParallelismConfig,
        TorchTensorParallelPlugin,
    )
    from accel_trackers import GeneralTracker, LoggerType

    # What ``log_with`` accepts: a tracker name, a LoggerType, a tracker object, or a list.
    LogWith = Union[
        str, LoggerType, GeneralTracker, Sequence[Union[str, LoggerType, GeneralTracker]]
    ]
    DeepSpeedPlugins = Union[DeepSpeedPlugin, dict[str, DeepSpeedPlugin]]

_UNSET: Any = object()
_KNOWN_HANDLERS = (
    AutocastKwargs,
    DistributedDataParallelKwargs,
    GradScalerKwargs,
    InitProcessGroupKwargs,
    ProfileKwargs,
)


class Accelerator(PrepareMixin, TrainingMixin, OpsMixin, TrackingMixin, CheckpointingMixin):
    """Adapts a PyTorch training script to the environment it was launched in.

    Create one per process, pass models, optimizers, schedulers and dataloaders through
    :meth:`prepare`, call :meth:`backward` instead of ``loss.backward()``, and the same script
    runs on one CPU, several processes or several machines, in mixed precision.

    Args:
        device_placement: Move prepared objects to :attr:`device`.
        split_batches: Deprecated spelling of ``DataLoaderConfiguration(split_batches=...)``.
        mixed_precision: ``"no"``, ``"fp16"``, ``"bf16"`` or ``"fp8"`` (default: the launcher's
            ``ACCEL_MIXED_PRECISION``, else ``"no"``).
        gradient_accumulation_steps: Batches accumulated per optimizer step (an integer >= 1;
            ``ACCEL_GRADIENT_ACCUMULATION_STEPS`` overrides it).
        cpu: Force the CPU.
        dataloader_config: How prepared dataloaders shard, dispatch and place batches.
        deepspeed_plugin: A ``DeepSpeedPlugin`` (or a dict of named plugins): train with
            DeepSpeed (default: one built from the launcher's environment under
            ``ACCEL_USE_DEEPSPEED=1``).
        fsdp_plugin: A ``FullyShardedDataParallelPlugin``: shard models with FSDP (default:
            built from ``ACCEL_FSDP_*`` when the launcher set ``ACCEL_USE_FSDP=1``).
        torch_tp_plugin: A ``TorchTensorParallelPlugin``: split layers over processes.
        megatron_lm_plugin: A ``MegatronLMPlugin``: train over megatron-core's model-parallel
            groups (default: built from ``ACCEL_MEGATRON_LM_*`` when the launcher set
            ``ACCEL_USE_MEGATRON_LM=1``).
        rng_types: Generators synchronised at the start of each epoch of a prepared loader.
        log_with: Trackers to log to: names (``"tensorboard"``, ``"wandb"`` ...), ``"all"``
            (every installed one), ``GeneralTracker`` instances, or a list of them. Resolved
            here, so an unknown name or an uninstalled backend fails at construction.
        project_dir: Folder of checkpoints and logs.
        project_config: A :class:`ProjectConfiguration`.
        gradient_accumulation_plugin: Full accumulation settings (instead of the step count).
        step_scheduler_with_optimizer: Step schedulers only when the optimizer steps.
        kwargs_handlers: Kwargs handlers customising DDP, autocast, grad scaler, process group.
        dynamo_backend: ``torch.compile`` backend (or use ``dynamo_plugin``).
        dynamo_plugin: Full ``torch.compile`` settings.
        deepspeed_plugins: Several named ``DeepSpeedPlugin`` (one per model); the first is
            active, ``accelerator.state.select_deepspeed_plugin(name)`` switches.
        parallelism_config: A ``ParallelismConfig``: how processes split between replicated
            data, sharded data and tensor parallelism (hybrid sharding, FSDP x TP).

    Raises:
        ValueError: On an argument outside its rule (``gradient_accumulation_steps=0``, an
            unknown tracker name ...); the message names the argument and the fix.
        ImportError: When ``log_with`` names a tracker whose backend is not installed; the
            message gives the ``pip install "accel-trackers[...]"`` command.
    """

    def __init__(
        self,
        device_placement: bool = True,
        split_batches: bool = _UNSET,
        mixed_precision: str | None = None,
        gradient_accumulation_steps: int = 1,
        cpu: bool = False,
        dataloader_config: DataLoaderConfiguration | None = None,
        deepspeed_plugin: DeepSpeedPlugins | None = None,
        fsdp_plugin: FullyShardedDataParallelPlugin | None = None,
        torch_tp_plugin: TorchTensorParallelPlugin | None = None,
        megatron_lm_plugin: Any = None,
        rng_types: list[str] | None = None,
        log_with: LogWith | None = None,
        project_dir: str | os.PathLike[str] | None = None,
        project_config: ProjectConfiguration | None = None,
        gradient_accumulation_plugin: GradientAccumulationPlugin | None = None,
        step_scheduler_with_optimizer: bool = True,
        kwargs_handlers: Sequence[KwargsHandler] | None = None,
        dynamo_backend: str | None = None,
        dynamo_plugin: TorchDynamoPlugin | None = None,
        deepspeed_plugins: DeepSpeedPlugins | None = None,
        parallelism_config: ParallelismConfig | None = None,
    ) -> None:
        _refuse_unsupported_engines()
        ds_plugins = resolve_deepspeed_plugins(deepspeed_plugin, deepspeed_plugins)
        megatron_lm_plugin = resolve_megatron_plugin(
            megatron_lm_plugin, ds_plugins is not None or fsdp_plugin is not None
        )
        fsdp_plugin, parallelism_config = resolve_parallel_plugins(
            fsdp_plugin,
            torch_tp_plugin,
            parallelism_config,
            deepspeed_given=ds_plugins is not None,
        )
        if project_config is None:
            project_config = ProjectConfiguration(
                project_dir=str(project_dir) if project_dir is not None else None
            )
        elif project_dir is not None:
            project_config.set_directories(str(project_dir))
        self.project_configuration = project_config
        # Trackers are resolved now, so a misspelt or uninstalled one fails here, not later in
        # init_trackers.
        log_with = _resolve_log_with(log_with, project_config.logging_dir)
        steps = _accumulation_steps(gradient_accumulation_steps, gradient_accumulation_plugin)

        self._handlers = {}
        for handler in kwargs_handlers or []:
            if not isinstance(handler, KwargsHandler):
                raise TypeError(
                    "kwargs_handlers takes KwargsHandler instances (DistributedDataParallelKwargs, "
                    f"GradScalerKwargs ...); got {type(handler).__name__}."
                )
            if type(handler) in self._handlers:
                raise ValueError(
                    f"kwargs_handlers holds two {type(handler).__name__}; got {kwargs_handlers}. "
                    "Pass each kind of handler once."
                )
            self._handlers[type(handler)] = handler

        if dynamo_plugin is not None and dynamo_backend is not None:
            raise ValueError(
                "pass either dynamo_backend or dynamo_plugin, not both; got "
                f"dynamo_backend={dynamo_backend!r} and a plugin. Put the backend in the plugin."
            )
        if dynamo_plugin is None:
            dynamo_plugin = TorchDynamoPlugin(backend=dynamo_backend)

        init_kwargs: dict[str, Any] = {}
        pg: InitProcessGroupKwargs | None = self._handler(InitProcessGroupKwargs)
        if pg is not None:
            init_kwargs = {"init_method": pg.init_method, "timeout": pg.timeout}
            if pg.backend and (torch.cuda.is_available() and not cpu):
                init_kwargs["backend"] = pg.backend
        self.state = AcceleratorState(
            mixed_precision=mixed_precision,
            cpu=cpu,
            dynamo_plugin=dynamo_plugin,
            fsdp_plugin=fsdp_plugin,
            torch_tp_plugin=parallelism_config.tp_handler if parallelism_config else None,
            deepspeed_plugin=ds_plugins,
            megatron_lm_plugin=megatron_lm_plugin,
            parallelism_config=parallelism_config,
            _from_accelerator=True,
            **init_kwargs,
        )
        self.parallelism_config = parallelism_config
        if ds_plugins is not None:
            self.state.distributed_type = DistributedType.DEEPSPEED
        elif megatron_runs_distributed(megatron_lm_plugin, self.state.num_processes):
            self.state.distributed_type = DistributedType.MEGATRON_LM
        elif shards_data(fsdp_plugin, parallelism_config, self.state.num_processes):
            self.state.distributed_type = DistributedType.FSDP

        if gradient_accumulation_plugin is None:
            gradient_accumulation_plugin = GradientAccumulationPlugin(num_steps=steps)
        self.gradient_state = GradientState(
            gradient_accumulation_plugin=gradient_accumulation_plugin
        )

        self.device_placement = device_placement
        self.dataloader_config = _dataloader_config(dataloader_config, split_batches)
        self.step_scheduler_with_optimizer = step_scheduler_with_optimizer
        self.rng_types = rng_types
        self._prepared = PreparedObjects()
        engine_cls = engine_class(self.state)
        handled = engine_cls.handles_mixed_precision
        self.scaler = None if handled else _make_scaler(self)
        self.engine = engine_cls(
            EngineContext(
                state=self.state,
                gradient_state=self.gradient_state,
                prepared=self._prepared,
                handlers=self._handlers,
                scaler=self.scaler,
            )
        )
        self._checkpointer = Checkpointer(
            project_config,
            self._prepared,
            self.engine,
            self.state,
            scaler=self.scaler,
            mixed_precision=self.mixed_precision,
        )
        self.native_amp = not handled and self.mixed_precision in ("fp16", "bf16", "fp8")
        self.fp8_recipe_handler = _fp8_recipe(self)
        self._fp8_replaced_params = {}
        self.step = 0
        self.flag_tensor = None
        self.log_with = log_with
        self.trackers = []

    # ------------------------------------------------------------------ properties
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

    def __repr__(self) -> str:
        return f"Accelerator(\n{self.state!r})"


def _resolve_log_with(log_with: Any, logging_dir: str | None) -> Any:
    """``log_with`` resolved by accel-trackers (unknown or uninstalled trackers raise)."""
    if log_with is None:
        return None
    from accel_trackers import filter_trackers

    return filter_trackers(log_with, logging_dir)


def _accumulation_steps(steps: Any, plugin: GradientAccumulationPlugin | None) -> int:
    """The number of accumulation steps, checked as the user wrote it.

    Raises:
        ValueError: When ``gradient_accumulation_steps`` is not an integer >= 1, is given
            together with a plugin, or the environment variable holds no integer.
    """
    if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
        raise ValueError(
            f"gradient_accumulation_steps must be an integer >= 1; got {steps!r} "
            f"({type(steps).__name__}). Pass e.g. gradient_accumulation_steps=4, or 1 to "
            "step the optimizer on every batch."
        )
    if plugin is not None:
        if steps != 1:
            raise ValueError(
                "pass gradient_accumulation_steps or gradient_accumulation_plugin, not both; "
                f"got gradient_accumulation_steps={steps} and {plugin}. Set num_steps in the "
                "plugin."
            )
        return int(plugin.num_steps or 1)
    return int(env.read_env(env.ACCEL_GRADIENT_ACCUMULATION_STEPS, steps))


def _refuse_unsupported_engines() -> None:
    """Refuse an engine this version cannot run, with the launcher's own words (Megatron-LM
    without megatron-core is refused by ``resolve_megatron_plugin``, in the same words)."""
    kind = env.read_env(env.ACCEL_DISTRIBUTED_TYPE, "")
    if str(kind).upper() == "MEGATRON_LM":
        return  # ACCEL_USE_MEGATRON_LM builds the plugin, or the refusal, in resolve_megatron_plugin
    asked = (kind, f"{env.ACCEL_DISTRIBUTED_TYPE}={kind} in the environment")
    message = unsupported_distributed_type(*asked)
    if message is not None:
        raise NotImplementedError(message)


def _dataloader_config(config: Any, split_batches: Any) -> Any:
    from accel_data import DataLoaderConfiguration

    if config is None:
        config = DataLoaderConfiguration()
    if split_batches is not _UNSET:
        config.split_batches = bool(split_batches)
    return config


def _make_scaler(accelerator: Accelerator) -> torch.amp.GradScaler | None:
    from accel_precision import make_grad_scaler

    return make_grad_scaler(
        accelerator.mixed_precision,
        accelerator.device.type,
        accelerator._handler(GradScalerKwargs),
    )


_FP8_RECIPES = ("AORecipeKwargs", "TERecipeKwargs", "MSAMPRecipeKwargs", "FP8RecipeKwargs")
_MULTI_DEVICE = tuple(
    t for t in DistributedType if t.value.startswith("MULTI_") and t.value != "MULTI_CPU"
)


def _recipe_of(accelerator: Accelerator, kind: str) -> Any:
    """The FP8 recipe the run uses when it is of class ``kind``, else None."""
    recipe = accelerator.fp8_recipe_handler
    return recipe if type(recipe).__name__ == kind else None


def _fp8_recipe(accelerator: Accelerator) -> Any:
    from accel_precision import resolve_fp8_recipe

    return resolve_fp8_recipe(accelerator.mixed_precision, accelerator._handlers.values())

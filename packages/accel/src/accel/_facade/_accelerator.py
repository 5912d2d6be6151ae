"""The ``Accelerator`` facade: wires state, data, precision, collectives and engines together.

One class, read section by section (fields, construction, state views, prepare, training step,
operations, tracking, checkpointing): every public method and property is here with its
documentation, and its body calls the component doing the work (the engine, the
``Checkpointer``, the process state, another package, or a module of this folder named after
the job: ``_prepare``, ``_training``, ``_operations``, ``_tracking``, ``_saving``,
``_state_view``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Sequence
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

from .._core._prepared_objects import PreparedObjects
from .._engines import EngineContext, engine_class
from .._engines._parallel_layout import (
    megatron_runs_distributed,
    resolve_deepspeed_plugins,
    resolve_megatron_plugin,
    resolve_parallel_plugins,
    shards_data,
)
from .._training_checkpoints._checkpointer import Checkpointer
from . import _operations, _prepare, _saving, _state_view, _tracking, _training

if TYPE_CHECKING:
    from accel_data import DataLoaderConfiguration
    from accel_state import (
        DeepSpeedPlugin,
        FullyShardedDataParallelPlugin,
        ParallelismConfig,
        TorchTensorParallelPlugin,
    )
    from accel_trackers import GeneralTracker, LoggerType
    from torch.utils.hooks import RemovableHandle

    from .._core._optimizer_wrappers import AcceleratedOptimizer, AcceleratedScheduler
    from .._engines import Engine

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


class Accelerator:
    """Adapts a PyTorch training script to the environment it was launched in.

    Create one per process, pass models, optimizers, schedulers and dataloaders through
    [`prepare`][accel.Accelerator.prepare], call [`backward`][accel.Accelerator.backward] instead of ``loss.backward()``, and the same script
    runs on one CPU, several processes or several machines, in mixed precision.

    Args:
        device_placement: Move prepared objects to [`device`][accel.Accelerator.device].
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
        project_config: A [`ProjectConfiguration`][accel_state.ProjectConfiguration].
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

    # == fields, each set by __init__ ==========================================================

    state: AcceleratorState
    """The run's shared state: processes, device, mixed precision, plugins."""
    gradient_state: GradientState
    """Gradient accumulation: the number of steps and whether this step synchronises."""
    engine: Engine
    """The engine of the run (DDP, FSDP, DeepSpeed ...), built from an ``EngineContext``."""
    _prepared: PreparedObjects
    """The registry of prepared and registered objects."""
    _checkpointer: Checkpointer
    """The checkpoint component (``save_state`` / ``load_state``)."""
    _handlers: dict[type, KwargsHandler]
    """The kwargs handlers passed, by class."""
    scaler: torch.amp.GradScaler | None
    """The fp16 grad scaler (None: no scaling, or the engine scales)."""
    project_configuration: ProjectConfiguration
    """Folders of the project, checkpoint naming and limits."""
    dataloader_config: DataLoaderConfiguration
    """How prepared dataloaders shard, dispatch and place batches."""
    parallelism_config: ParallelismConfig | None
    """How processes split between data, shard, tensor and context parallelism."""
    device_placement: bool
    """Whether prepared objects move to the device by default."""
    step_scheduler_with_optimizer: bool
    """Whether prepared schedulers step only when their optimizer steps."""
    rng_types: list[str] | None
    """Generators synchronised at the start of each epoch of a prepared loader."""
    native_amp: bool
    """Whether prepared models' forward runs under the run's autocast."""
    fp8_recipe_handler: Any
    """The FP8 recipe of the run (None without FP8)."""
    _fp8_replaced_params: dict[Any, Any]
    """Parameters the FP8 conversion replaced, old to new (for optimizers prepared later)."""
    step: int
    """Batches seen in the current accumulation cycle (saved by ``save_state``)."""
    flag_tensor: torch.Tensor | None
    """The flag of ``set_trigger`` (None: never raised)."""
    log_with: Any
    """The trackers resolved from ``log_with`` (None: no tracking)."""
    trackers: list[Any]
    """The started trackers (after ``init_trackers``)."""
    _tracker_set: Any = None
    """The running trackers of ``init_trackers`` (None before it)."""

    # == construction ==========================================================================

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

    def __repr__(self) -> str:
        return f"Accelerator(\n{self.state!r})"

    def _handler(self, kind: type) -> Any:
        """The kwargs handler of class ``kind`` that was passed, else None."""
        return self._handlers.get(kind)

    # == state views: the run, read from the state and the settings ============================

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
        return _state_view.fp8_backend_of(self.fp8_recipe_handler)

    # The reference's handler attributes: the kwargs handler of each kind that was passed.
    ddp_handler = property(lambda self: self._handler(DistributedDataParallelKwargs))
    scaler_handler = property(lambda self: self._handler(GradScalerKwargs))
    init_handler = property(lambda self: self._handler(InitProcessGroupKwargs))
    autocast_handler = property(lambda self: self._handler(AutocastKwargs))
    profile_handler = property(lambda self: self._handler(ProfileKwargs))
    te_recipe_handler = property(lambda self: _state_view.recipe_of(self, "TERecipeKwargs"))
    ao_recipe_handler = property(lambda self: _state_view.recipe_of(self, "AORecipeKwargs"))
    msamp_recipe_handler = property(lambda self: _state_view.recipe_of(self, "MSAMPRecipeKwargs"))

    @property
    def has_fp8_handler(self) -> bool:
        """Whether an FP8 recipe was passed in ``kwargs_handlers``."""
        return _state_view.has_fp8_handler(self)

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
        return _state_view.is_multi_device(self)

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
        return _state_view.has_lomo_optimizer(self)

    @property
    def data_parallel_rank(self) -> int:
        """Index of this process's replica (``dp_replicate`` mesh coordinate)."""
        return _state_view.mesh_rank(self, "dp_replicate", "data_parallel_rank")

    @property
    def data_parallel_shard_rank(self) -> int:
        """Index of this process within its replica's shards (``dp_shard`` coordinate)."""
        return _state_view.mesh_rank(self, "dp_shard", "data_parallel_shard_rank")

    @property
    def tensor_parallel_rank(self) -> int:
        """Index of this process within its tensor-parallel group (``tp`` coordinate)."""
        return _state_view.mesh_rank(self, "tp", "tensor_parallel_rank")

    @property
    def context_parallel_rank(self) -> int:
        """Index of this process within its context-parallel group (``cp`` coordinate)."""
        return _state_view.mesh_rank(self, "cp", "context_parallel_rank")

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

    # == prepare: place and wrap each object for the run =======================================

    def prepare(self, *args: Any, device_placement: list[bool] | None = None) -> Any:
        """Prepare models, optimizers, schedulers and dataloaders, in any order and mix.

        Args:
            *args: The objects; others are returned unchanged.
            device_placement: One flag per object (default: the Accelerator's setting).

        Returns:
            The prepared objects in the same order (a single object when one was passed). An
            object that ``prepare`` already returned comes back as is, registered once.
        """
        return _prepare.prepare(self, *args, device_placement=device_placement)

    def prepare_model(
        self,
        model: torch.nn.Module,
        device_placement: bool | None = None,
        evaluation_mode: bool = False,
    ) -> torch.nn.Module:
        """Place ``model`` on the device, add autocast for mixed precision, and wrap it for
        the engine (DDP on several processes). ``evaluation_mode`` skips the wrapper."""
        return _prepare.prepare_model(self, model, device_placement, evaluation_mode)

    def prepare_optimizer(
        self, optimizer: torch.optim.Optimizer, device_placement: bool | None = None
    ) -> AcceleratedOptimizer:
        """Wrap ``optimizer`` for accumulation and mixed precision."""
        return _prepare.prepare_optimizer(self, optimizer, device_placement)

    def prepare_scheduler(self, scheduler: Any) -> AcceleratedScheduler:
        """Wrap ``scheduler`` so it steps with the optimizer it drives."""
        return _prepare.prepare_scheduler(self, scheduler)

    def prepare_data_loader(
        self,
        data_loader: torch.utils.data.DataLoader,
        device_placement: bool | None = None,
        slice_fn_for_dispatch: Any = None,
    ) -> Any:
        """Shard ``data_loader`` between the processes (see ``accel_data.prepare_data_loader``)."""
        return _prepare.prepare_data_loader(
            self, data_loader, device_placement, slice_fn_for_dispatch
        )

    def deepspeed_ulysses_dl_adapter(self, dl: Any, model: Any) -> Any:
        """Adapt a loader to DeepSpeed Ulysses sequence parallelism: each process then gets its
        slice of every sequence (see ``ParallelismConfig(sp_size=...)``).

        ``prepare`` adapts every loader it prepares under sequence parallelism, in any call;
        this is for a loader prepared elsewhere. Without sequence parallelism, or for a loader
        already adapted, ``dl`` comes back unchanged.

        Args:
            dl: A prepared data loader.
            model: The prepared model (kept for the reference's signature; the slices go to
                the Accelerator's device).
        """
        return self.engine.sequence_parallel_loader(dl)

    def unwrap_model(
        self,
        model: torch.nn.Module,
        keep_fp32_wrapper: bool = True,
        keep_torch_compile: bool = True,
    ) -> torch.nn.Module:
        """Return the user's module from inside compile and engine wrappers (DDP,
        DataParallel, DeepSpeed, FSDP), as ``extract_model_from_parallel`` does.

        Args:
            model: A prepared model.
            keep_fp32_wrapper: Keep the autocast wrapper on ``forward`` (False restores the
                original forward).
            keep_torch_compile: Return the compiled module (around the unwrapped model) when
                the model was compiled; False returns the model under it.
        """
        return _prepare.unwrap_model(self, model, keep_fp32_wrapper, keep_torch_compile)

    def verify_device_map(self, model: torch.nn.Module) -> bool:
        """Whether ``model`` was dispatched over several devices with a device map (such a model
        must not be wrapped for data parallelism)."""
        return _prepare.verify_device_map(self, model)

    # == training step: backward, accumulation, synchronisation, clipping ======================

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """Backward pass of ``loss``, divided by the accumulation steps and scaled under fp16.

        Keyword arguments go to ``loss.backward`` (e.g. ``retain_graph=True``), except
        ``scale_wrt_gas=False`` under DeepSpeed (``loss`` is then not divided by the
        accumulation steps, as DeepSpeed's own switch does), and ``learning_rate`` while a
        LOMO optimizer is prepared: then the pass is
        [`lomo_backward`][accel.Accelerator.lomo_backward] at that rate (transformers'
        ``Trainer`` with ``optim="lomo"`` calls it so).
        """
        _training.backward(self, loss, **kwargs)

    def lomo_backward(self, loss: torch.Tensor, learning_rate: float) -> None:
        """Backward pass fused with the update of LOMO optimizers (``lomo_optim.Lomo`` /
        ``AdaLomo``): each gradient updates its parameter as soon as it is computed.

        Raises:
            ValueError: when no prepared optimizer is a LOMO optimizer.
        """
        _training.lomo_backward(self, loss, learning_rate)

    @contextlib.contextmanager
    def maybe_context_parallel(
        self,
        buffers: list[torch.Tensor] | None = None,
        buffer_seq_dims: list[int] | None = None,
        no_restore_buffers: set[torch.Tensor] | None = None,
    ) -> Iterator[None]:
        """Context of one training step under context parallelism (``cp_size`` > 1).

        Inside it, each tensor of ``buffers`` holds only this process's part of its sequence
        dimension (changed in place; head-and-tail balanced when the length is a multiple of
        2 * ``cp_size``), and ``F.scaled_dot_product_attention`` runs as ring attention over
        the context-parallel processes (causal, without a mask). On exit the buffers get their
        whole contents back, except those in ``no_restore_buffers``. Without context
        parallelism the context does nothing. Enter it anew for every step.

        Args:
            buffers: Tensors with a sequence dimension: inputs, labels (shifted before the
                split), position ids ...
            buffer_seq_dims: The sequence dimension of each buffer.
            no_restore_buffers: Buffers (a subset of ``buffers``) left split on exit.

        Raises:
            ValueError: when the buffers and dimensions do not pair up, or a sequence length
                is not a multiple of ``cp_size``.
        """
        with _training.maybe_context_parallel(self, buffers, buffer_seq_dims, no_restore_buffers):
            yield

    def _do_sync(self) -> None:
        """Decide whether this step ends an accumulation cycle."""
        _training._do_sync(self)

    @contextlib.contextmanager
    def accumulate(self, *models: torch.nn.Module) -> Iterator[None]:
        """Context for one batch of gradient accumulation.

        Inside it, gradients are synchronised (and ``optimizer.step``/``zero_grad`` act) only on
        every ``gradient_accumulation_steps``-th batch and on the last batch of the dataloader;
        other batches run their backward pass under ``no_sync``.
        """
        with _training.accumulate(self, *models):
            yield

    @contextlib.contextmanager
    def no_sync(self, model: torch.nn.Module) -> Iterator[None]:
        """Context in which backward passes of ``model`` do not all-reduce gradients."""
        with self.engine.no_sync(model):
            yield

    @contextlib.contextmanager
    def trigger_sync_in_backward(self, model: torch.nn.Module) -> Iterator[None]:
        """Force the next backward pass of ``model`` to synchronise gradients, even inside
        ``no_sync`` (e.g. after several forward passes)."""
        from .._engines._ddp import trigger_sync_in_backward

        with trigger_sync_in_backward(model):
            yield

    @contextlib.contextmanager
    def autocast(self, autocast_handler: Any = None) -> Iterator[None]:
        """Autocast block for the run's mixed precision (no-op in full precision).

        Args:
            autocast_handler: An ``AutocastKwargs`` overriding the Accelerator's.
        """
        with _training.autocast(self, autocast_handler):
            yield

    def unscale_gradients(self, optimizer: Any = None) -> None:
        """Divide the gradients by the fp16 loss scale (once per step; no-op otherwise).

        Args:
            optimizer: A prepared optimizer or a list of them (default: all).
        """
        _training.unscale_gradients(self, optimizer)

    def clip_grad_norm_(
        self,
        parameters: Iterable[torch.nn.Parameter],
        max_norm: float,
        norm_type: float = 2,
    ) -> torch.Tensor:
        """Clip the norm of the gradients (unscaling them first under fp16); return the norm."""
        return _training.clip_grad_norm_(self, parameters, max_norm, norm_type)

    def clip_grad_value_(self, parameters: Iterable[torch.nn.Parameter], clip_value: float) -> None:
        """Clip each gradient value to ``[-clip_value, clip_value]`` (unscaling first)."""
        _training.clip_grad_value_(self, parameters, clip_value)

    # == operations: collectives, process control, triggers, memory, profiling =================

    # ------------------------------------------------------------- collectives
    def gather(self, tensor: Any) -> Any:
        """Gather (nested) tensors from every process, concatenated along dim 0."""
        from accel_collectives import gather

        return gather(tensor)

    def gather_for_metrics(self, input_data: Any, use_gather_object: bool = False) -> Any:
        """Gather predictions for metrics, dropping the samples that were duplicated to give
        every process a full last batch."""
        from accel_data import gather_for_metrics

        return gather_for_metrics(input_data, use_gather_object=use_gather_object)

    def reduce(self, tensor: Any, reduction: str = "sum", scale: float = 1.0) -> Any:
        """Reduce (nested) tensors over every process: ``"sum"``, ``"mean"`` or ``"none"``."""
        from accel_collectives import reduce

        return reduce(tensor, reduction=reduction, scale=scale)

    def pad_across_processes(
        self, tensor: Any, dim: int = 0, pad_index: int = 0, pad_first: bool = False
    ) -> Any:
        """Pad (nested) tensors to the largest size over the processes along ``dim``."""
        from accel_collectives import pad_across_processes

        return pad_across_processes(tensor, dim=dim, pad_index=pad_index, pad_first=pad_first)

    # --------------------------------------------------------- process control
    def split_between_processes(
        self, inputs: Any, apply_padding: bool = False
    ) -> contextlib.AbstractContextManager[Any]:
        """Context giving this process its share of ``inputs``
        (see ``PartialState.split_between_processes``)."""
        return self.state._partial.split_between_processes(inputs, apply_padding=apply_padding)

    def wait_for_everyone(self) -> None:
        """Block until every process reaches this point."""
        self.state._partial.wait_for_everyone()

    def print(self, *args: Any, **kwargs: Any) -> None:
        """``print`` once per machine."""
        self.state._partial.print(*args, **kwargs)

    def main_process_first(self) -> contextlib.AbstractContextManager[None]:
        """The main process runs the block first, then the others."""
        return self.state._partial.main_process_first()

    def local_main_process_first(self) -> contextlib.AbstractContextManager[None]:
        """Each machine's first process runs the block first, then the others."""
        return self.state._partial.local_main_process_first()

    def on_main_process(self, function: Callable[..., Any] | None = None) -> Any:
        """Decorator: run on the main process only."""
        return self.state._partial.on_main_process(function)

    def on_local_main_process(self, function: Callable[..., Any] | None = None) -> Any:
        """Decorator: run on each machine's first process only."""
        return self.state._partial.on_local_main_process(function)

    def on_last_process(self, function: Callable[..., Any]) -> Any:
        """Decorator: run on the last process only."""
        return self.state._partial.on_last_process(function)

    def on_process(
        self,
        function: Callable[..., Any] | None = None,
        process_index: int | None = None,
    ) -> Any:
        """Decorator: run on the process of global index ``process_index`` only."""
        return self.state._partial.on_process(function, process_index=process_index)

    def on_local_process(
        self,
        function: Callable[..., Any] | None = None,
        local_process_index: int | None = None,
    ) -> Any:
        """Decorator: run on the process of local index ``local_process_index`` only."""
        return self.state._partial.on_local_process(
            function, local_process_index=local_process_index
        )

    # ----------------------------------------------------------------- triggers
    def set_trigger(self) -> None:
        """Raise a flag on this process; [`check_trigger`][accel.Accelerator.check_trigger] sees it on every process."""
        self.flag_tensor = torch.tensor(1, device=self.state.device)

    def check_trigger(self) -> bool:
        """Whether any process called [`set_trigger`][accel.Accelerator.set_trigger] since the last check (resets it).

        A collective: call it on every process.
        """
        return _operations.check_trigger(self)

    # ------------------------------------------------------------------ memory
    def free_memory(self, *objects: Any) -> list[None]:
        """Drop every prepared object and the given references, collect garbage, empty device
        caches and reset [`step`][accel.Accelerator.step]. Use between two trainings in one script."""
        return _operations.free_memory(self, *objects)

    def clear(self, *objects: Any) -> list[None]:
        """Alias of [`free_memory`][accel.Accelerator.free_memory]."""
        return self.free_memory(*objects)

    # -------------------------------------------------------------------- data
    def skip_first_batches(self, dataloader: Any, num_batches: int = 0) -> Any:
        """A loader that starts after ``num_batches`` batches, for this epoch only."""
        from accel_data import skip_first_batches

        return skip_first_batches(dataloader, num_batches=num_batches)

    @contextlib.contextmanager
    def join_uneven_inputs(
        self, joinables: list[Any], even_batches: bool | None = None
    ) -> Iterator[None]:
        """Train or evaluate on loaders whose processes get different numbers of batches.

        Processes that run out keep answering the others' collectives (``torch``'s ``Join``).

        Args:
            joinables: Prepared DDP models (and other ``Joinable`` objects).
            even_batches: Override ``even_batches`` of the prepared loaders inside the block
                (usually ``False``, so that no sample is repeated).
        """
        with _operations.join_uneven_inputs(self, joinables, even_batches):
            yield

    # ---------------------------------------------------------------- profiling
    @contextlib.contextmanager
    def profile(self, profile_handler: Any = None) -> Iterator[Any]:
        """Profile the block with ``torch.profiler``; with ``output_trace_dir`` set, write a
        Chrome trace ``trace_rank_<process_index>.json`` there.

        Args:
            profile_handler: A ``ProfileKwargs`` (default: the Accelerator's, else defaults).
        """
        with _operations.profile(self, profile_handler) as prof:
            yield prof

    # == tracking ==============================================================================

    def init_trackers(
        self,
        project_name: str,
        config: dict[str, Any] | None = None,
        init_kwargs: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Start the trackers named by ``log_with`` (on the main process; no-ops elsewhere).

        Args:
            project_name: Project / run name given to each backend.
            config: Hyper-parameters to store (nested dicts, tensors and None are accepted).
            init_kwargs: Per-tracker keyword arguments, e.g. ``{"wandb": {"mode": "offline"}}``.
        """
        _tracking.init_trackers(self, project_name, config, init_kwargs)

    def log(
        self,
        values: dict[str, Any],
        step: int | None = None,
        log_kwargs: dict[str, dict[str, Any]] | None = None,
    ) -> None:
        """Log ``values`` (nested dicts, tensors, numpy scalars accepted) to every tracker."""
        _tracking.log(self, values, step, log_kwargs)

    def get_tracker(self, name: str, unwrap: bool = False) -> Any:
        """The tracker called ``name`` (its native object with ``unwrap=True``); on processes
        that do not log, a stand-in whose every call does nothing."""
        return _tracking.get_tracker(self, name, unwrap)

    def end_training(self) -> None:
        """Finish every tracker, wait for an asynchronous ``save_state`` still writing and free
        the host memory kept for the next one.

        Never raises because a backend already finished; a second call does nothing. Raises
        ``AsyncSaveError`` (after the trackers are finished) if that save failed."""
        _tracking.end_training(self)

    # == checkpointing =========================================================================

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
        return self.engine.model_state_dict(model) if unwrap else model.state_dict()

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
        _saving.save_model(self, model, save_directory, max_shard_size, safe_serialization)

    def save(self, obj: Any, f: Any, safe_serialization: bool = False) -> None:
        """Save ``obj`` to ``f`` once per job (once per machine with ``save_on_each_node``)."""
        _saving.save(self, obj, f, safe_serialization)


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


def _fp8_recipe(accelerator: Accelerator) -> Any:
    from accel_precision import resolve_fp8_recipe

    return resolve_fp8_recipe(accelerator.mixed_precision, accelerator._handlers.values())

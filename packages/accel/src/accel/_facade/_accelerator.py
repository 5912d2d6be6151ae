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
from ._operations import OpsMixin
from ._prepare import PrepareMixin
from ._saving import CheckpointingMixin
from ._state_view import StateViewMixin
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


class Accelerator(
    StateViewMixin, PrepareMixin, TrainingMixin, OpsMixin, TrackingMixin, CheckpointingMixin
):
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

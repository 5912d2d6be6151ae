"""Training with DeepSpeed: ZeRO stages 0-3, offload, DeepSpeed's mixed precision and loss scaling.

``prepare`` hands the model, its optimizer and (for a scheduler of the DeepSpeed config) the
scheduler together to ``deepspeed.initialize`` after completing the config's ``"auto"`` values
from the Accelerator. ``accelerator.backward`` runs DeepSpeed's backward and, at the end of each
accumulation cycle, DeepSpeed's step, which reduces gradients, clips them to the config's
``gradient_clipping``, updates the weights and zeroes the gradients. The optimizer and
scheduler returned by ``prepare`` therefore do nothing on ``step``/``zero_grad`` (a scheduler
built with torch keeps following real optimizer steps as under DDP).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

import torch
from accel_state import DeepSpeedPlugin

from .._base import Engine
from . import _ulysses as ulysses
from ._deepspeed_config import AUTO_VALUE, complete_config
from ._deepspeed_files import validate_folder
from ._deepspeed_objects import (
    DeepSpeedEngineWrapper,
    DeepSpeedOptimizerWrapper,
    DeepSpeedSchedulerWrapper,
    DummyOptim,
    DummyScheduler,
)

if TYPE_CHECKING:
    from .._context import EngineContext

CHECKPOINT_TAG = "deepspeed_model"
"""Name of the folder (DeepSpeed "tag") holding model ``i`` in a checkpoint: ``{tag}_{i}``."""


def import_deepspeed() -> Any:
    """Import DeepSpeed, or raise an ImportError naming the install command."""
    try:
        import deepspeed
    except ImportError as err:
        raise ImportError(
            "training with DeepSpeed needs the deepspeed package, which is not installed; got "
            f'ImportError({err}). Run: pip install "accel-torch[deepspeed]"'
        ) from err
    return deepspeed


class DeepSpeedEngine(Engine):
    """Wraps each prepared model in a ``deepspeed.DeepSpeedEngine`` built from the active
    [`DeepSpeedPlugin`][accel_state.DeepSpeedPlugin].

    Several models: prepare each in its own ``prepare`` call after selecting its plugin with
    ``accelerator.state.select_deepspeed_plugin(name)``. ``backward`` steps the engine of the
    active plugin when it trains, else the last prepared engine that has an optimizer.
    """

    handles_mixed_precision = True
    replicated_states = False

    def __init__(self, context: EngineContext) -> None:
        super().__init__(context)
        plugins = context.state.deepspeed_plugins
        if not plugins:
            raise ValueError(
                "the DeepSpeed engine needs a DeepSpeedPlugin; got none. Pass "
                "Accelerator(deepspeed_plugin=DeepSpeedPlugin(...)) or launch with "
                "accel launch --use_deepspeed."
            )
        self.sp_size = _sequence_parallel_size(context)
        for plugin in plugins.values():
            plugin.set_mixed_precision(context.mixed_precision)
            _reconcile_accumulation(context, plugin)
            ulysses.check_deepspeed_config(plugin.deepspeed_config, self.sp_size)
        if self.sp_size > 1:
            ulysses.setup_groups(self.sp_size)
        self.engines: list[Any] = []
        self._wrappers: dict[int, DeepSpeedEngineWrapper] = {}
        self._plugins: dict[int, DeepSpeedPlugin] = {}
        self._trainable_by_plugin: dict[int, DeepSpeedEngineWrapper] = {}
        self._last_trainable: DeepSpeedEngineWrapper | None = None

    # ------------------------------------------------------------------ prepare
    def prepare_all(self, objects: Sequence[object]) -> dict[int, object]:
        """Build one DeepSpeed engine from the model, optimizer and scheduler in ``objects``.

        Returns:
            The prepared objects by position (model, optimizer, config scheduler); torch
            schedulers are left to the facade, which makes them follow the optimizer.
        """
        models = [(i, o) for i, o in enumerate(objects) if isinstance(o, torch.nn.Module)]
        optimizers = [
            (i, o)
            for i, o in enumerate(objects)
            if isinstance(o, (torch.optim.Optimizer, DummyOptim))
        ]
        dummy_schedulers = [(i, o) for i, o in enumerate(objects) if isinstance(o, DummyScheduler)]
        loaders = {
            i: self.sequence_parallel_loader(o)
            for i, o in enumerate(objects)
            if isinstance(o, torch.utils.data.DataLoader) and self.sp_size > 1
        }
        if not models:
            if optimizers or dummy_schedulers:
                raise ValueError(
                    "under DeepSpeed an optimizer is prepared together with its model; got an "
                    "optimizer or scheduler without a model. Pass them in one call: "
                    "accelerator.prepare(model, optimizer, scheduler, dataloader)."
                )
            return loaders
        if len(models) > 1 or len(optimizers) > 1 or len(dummy_schedulers) > 1:
            raise ValueError(
                "one DeepSpeed engine is built per prepare call, from one model, one optimizer "
                f"and one scheduler; got {len(models)} models, {len(optimizers)} optimizers, "
                f"{len(dummy_schedulers)} config schedulers. Prepare each model in its own call, "
                "after accelerator.state.select_deepspeed_plugin(name) when they need different "
                "DeepSpeed configs."
            )
        model_index, model = models[0]
        optimizer = optimizers[0][1] if optimizers else None
        scheduler = dummy_schedulers[0][1] if dummy_schedulers else None
        engine, ds_optimizer, ds_scheduler = self._initialize(model, optimizer, scheduler)
        prepared: dict[int, Any] = {**loaders, model_index: engine}
        if optimizer is not None:
            client = optimizer if isinstance(optimizer, torch.optim.Optimizer) else ds_optimizer
            wrapped = DeepSpeedOptimizerWrapper(client, engine=engine)
            self.context.prepared.add_optimizer(wrapped)
            prepared[optimizers[0][0]] = wrapped
            if scheduler is not None:
                wrapped_scheduler = DeepSpeedSchedulerWrapper(ds_scheduler, [wrapped])
                self.context.prepared.add_scheduler(wrapped_scheduler)
                prepared[dummy_schedulers[0][0]] = wrapped_scheduler
        return prepared

    def wrap_model(self, model: torch.nn.Module, evaluation_mode: bool) -> torch.nn.Module:
        """A model prepared alone (``prepare_model``) gets an engine without optimizer."""
        if isinstance(model, _engine_class()):
            return model
        engine, _, _ = self._initialize(model, None, None)
        return engine

    def sequence_parallel_loader(self, loader: Any) -> Any:
        """Under Ulysses (``sp_size`` > 1), ``loader`` yielding this process's slice of each
        sequence (once: an adapted loader comes back as is); else ``loader``.

        The adapted loader takes the registered loader's slot, so that ``save_state`` saves
        its position in slices (a run can resume inside a group of ``sp_size`` steps)."""
        if self.sp_size == 1 or isinstance(loader, ulysses.SequenceParallelLoader):
            return loader
        handler = self.context.state.parallelism_config.sp_handler
        fixed = None if handler.sp_seq_length_is_variable else handler.sp_seq_length
        adapted = ulysses.SequenceParallelLoader(loader, self.context.device, fixed)
        if any(item is loader for item in self.context.prepared.dataloaders):
            self.context.prepared.replace("loader", loader, adapted)
        return adapted

    def _initialize(self, model: torch.nn.Module, optimizer: Any, scheduler: Any) -> Any:
        deepspeed = import_deepspeed()
        plugin: DeepSpeedPlugin = self.context.state.deepspeed_plugin
        config = complete_config(self.context, plugin, model, optimizer, scheduler, self.sp_size)
        kwargs: dict[str, Any] = {"model": model, "config_params": config}
        if isinstance(optimizer, DummyOptim):
            if "optimizer" not in config:
                raise ValueError(
                    "DummyOptim stands for the optimizer of the DeepSpeed config; got a config "
                    'without an "optimizer" section. Add the section, or pass a torch optimizer.'
                )
            kwargs["model_parameters"] = optimizer.params
        elif optimizer is not None:
            if "optimizer" in config:
                raise ValueError(
                    'the optimizer is defined twice: by the DeepSpeed config\'s "optimizer" '
                    f"section and by the {type(optimizer).__name__} passed to prepare. Remove the "
                    "section, or pass accel.utils.DummyOptim(model.parameters(), lr=...)."
                )
            config.setdefault("zero_allow_untested_optimizer", True)
            kwargs["optimizer"] = optimizer
        if isinstance(scheduler, DummyScheduler):
            if scheduler.lr_scheduler_callable is not None:
                kwargs["lr_scheduler"] = scheduler.lr_scheduler_callable
            elif "scheduler" not in config:
                raise ValueError(
                    "DummyScheduler stands for the scheduler of the DeepSpeed config; got a "
                    'config without a "scheduler" section. Add the section, pass '
                    "DummyScheduler(..., lr_scheduler_callable=fn), or a torch scheduler."
                )
        if self.sp_size > 1:
            handler = self.context.state.parallelism_config.sp_handler
            micro = int(config["train_micro_batch_size_per_gpu"])
            kwargs["mpu"] = ulysses.register_attention(model, self.sp_size, handler, micro)
        engine, ds_optimizer, _, ds_scheduler = deepspeed.initialize(**kwargs)
        wrapper = DeepSpeedEngineWrapper(engine)
        self.engines.append(engine)
        self._wrappers[id(engine)] = wrapper
        self._plugins[id(engine)] = plugin
        if optimizer is not None:
            self._trainable_by_plugin[id(plugin)] = wrapper
            self._last_trainable = wrapper
        return engine, ds_optimizer, ds_scheduler

    # ------------------------------------------------------------------ training loop
    def unwrap(self, model: torch.nn.Module) -> torch.nn.Module:
        inner: Any = model
        return inner.module if isinstance(model, _engine_class()) else model

    def is_wrapped(self, model: torch.nn.Module) -> bool:
        return isinstance(model, _engine_class())

    def no_sync(self, model: torch.nn.Module) -> contextlib.AbstractContextManager[object]:
        """A null context: DeepSpeed decides when gradients travel. Stages 0 and 1 reduce them at
        the end of the accumulation cycle only; stages 2 and 3 reduce-scatter every backward
        into the partitioned gradient buffers (that is how they save memory)."""
        return contextlib.nullcontext()

    def backward(self, loss: torch.Tensor, **kwargs: Any) -> None:
        """DeepSpeed's backward; at the end of an accumulation cycle, DeepSpeed's step."""
        wrapper = self._backward_wrapper()
        wrapper.backward(loss, sync_gradients=self.context.gradient_state.sync_gradients, **kwargs)

    def _backward_wrapper(self) -> DeepSpeedEngineWrapper:
        active = self.context.state.deepspeed_plugin
        wrapper = self._trainable_by_plugin.get(id(active)) or self._last_trainable
        if wrapper is None:
            raise RuntimeError(
                "accelerator.backward under DeepSpeed needs a model prepared with an optimizer; "
                "got only models prepared without one. Pass the optimizer to prepare with its "
                "model: accelerator.prepare(model, optimizer, dataloader)."
            )
        return wrapper

    def clip_grad_norm_(
        self, parameters: Iterable[torch.nn.Parameter], max_norm: float, norm_type: float = 2
    ) -> torch.Tensor:
        """DeepSpeed clips inside its step to the config's ``gradient_clipping``: check that it
        is ``max_norm`` and return the norm DeepSpeed measured at its last step."""
        plugin = self._plugin_of(self._backward_wrapper().engine)
        configured = plugin.deepspeed_config.get("gradient_clipping")
        if norm_type != 2 or not configured or float(configured) != float(max_norm):
            raise ValueError(
                "under DeepSpeed, gradients are clipped inside DeepSpeed's step (run by "
                "accelerator.backward) to the config's gradient_clipping, with the 2-norm; got "
                f"clip_grad_norm_(max_norm={max_norm}, norm_type={norm_type}) and "
                f"gradient_clipping={configured!r}. Set DeepSpeedPlugin(gradient_clipping="
                f"{max_norm}) (or gradient_clipping in the config) and keep the call, which then "
                "returns the measured norm."
            )
        norm = self._backward_wrapper().get_global_grad_norm()
        return torch.tensor(float("nan") if norm is None else norm)

    def _plugin_of(self, engine: object) -> DeepSpeedPlugin:
        return self._plugins[id(engine)]

    # ------------------------------------------------------------------ states
    def model_state_dict(self, model: torch.nn.Module) -> dict[str, Any]:
        """Full weights of ``model``. Under ZeRO 3 the shards are gathered layer by layer: the
        main process gets the whole state dict, the others an empty dict (call on every
        process)."""
        engine: Any = model
        if not isinstance(engine, _engine_class()):
            return self.unwrap(model).state_dict()
        if engine.zero_optimization_partition_weights():
            state = engine._zero3_consolidated_16bit_state_dict()
            return dict(state) if state is not None else {}
        return engine.module.state_dict()

    def release(self) -> None:
        """Forget the DeepSpeed engines (``free_memory``) so that their memory can be freed."""
        for engine in self.engines:
            destroy = getattr(engine, "destroy", None)  # DeepSpeed >= 0.14
            if destroy is not None:
                destroy()
        self.engines.clear()
        self._wrappers.clear()
        self._plugins.clear()
        self._trainable_by_plugin.clear()
        self._last_trainable = None

    # ------------------------------------------------ checkpoint layout (save_state / load_state)
    # Every process writes its own shards through DeepSpeed's checkpointing: weights, optimizer
    # and DeepSpeed's scheduler of engine ``i`` under ``{folder}/deepspeed_model_{i}``. A model
    # prepared without an optimizer does not change during training: nothing is written for it.
    def save_model_state(self, model: torch.nn.Module, output_dir: str, index: int) -> bool:
        engine: Any = model
        if isinstance(engine, _engine_class()) and engine.optimizer is not None:
            tag = f"{CHECKPOINT_TAG}_{index}"
            engine.save_checkpoint(output_dir, tag=tag, save_latest=False)
        return True

    def validate_model_state(
        self, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> None:
        """Read every ``.pt`` file of ``{input_dir}/deepspeed_model_{index}`` with
        ``torch.load(weights_only=True)`` (DeepSpeed itself unpickles them without restriction).

        Raises:
            accel_bigmodel.UntrustedPickleError: naming the refused file and how to opt in.
        """
        validate_folder(os.path.join(input_dir, f"{CHECKPOINT_TAG}_{index}"), trust_pickles)

    def load_model_state(
        self, model: torch.nn.Module, input_dir: str, index: int, *, trust_pickles: bool = False
    ) -> bool:
        engine: Any = model
        if not isinstance(engine, _engine_class()) or engine.optimizer is None:
            return True
        tag = f"{CHECKPOINT_TAG}_{index}"
        if not os.path.isdir(os.path.join(input_dir, tag)):
            return False
        self.validate_model_state(input_dir, index, trust_pickles=trust_pickles)
        path, _ = engine.load_checkpoint(input_dir, tag=tag)
        if path is None:
            raise RuntimeError(
                f"DeepSpeed could not load engine {index} from {input_dir}/{tag}; got no "
                "checkpoint loaded. Check that the folder is complete and that the ZeRO stage "
                "and number of processes match the saving run."
            )
        return True

    def save_optimizer_state(
        self, optimizer: torch.optim.Optimizer, output_dir: str, index: int
    ) -> bool:
        return True  # written with its engine by save_model_state

    def check_async_save(self) -> None:
        """Refuse: DeepSpeed's own asynchronous writers are not reachable from ``save_state``.

        Raises:
            NotImplementedError: with the reason and the fix.
        """
        raise NotImplementedError(
            "save_state(async_save=True) copies every state to host memory and writes it in "
            "the background; DeepSpeed engines write their ZeRO partitions through "
            "engine.save_checkpoint, whose asynchronous engines (decoupled / fast checkpoint "
            "engines) are configured in the DeepSpeed config and need the compiled async_io "
            "op (libaio), so accel does not save them asynchronously; got "
            "distributed_type=DEEPSPEED. Call save_state(async_save=False) (or leave "
            "ProjectConfiguration.async_save off) with DeepSpeed."
        )

    def load_optimizer_state(
        self,
        optimizer: torch.optim.Optimizer,
        input_dir: str,
        index: int,
        *,
        trust_pickles: bool = False,
    ) -> bool:
        return True  # restored (and its files checked) with its engine by load_model_state


def _engine_class() -> Any:
    return import_deepspeed().DeepSpeedEngine


def _sequence_parallel_size(context: EngineContext) -> int:
    """``ParallelismConfig.sp_size`` (1 without a layout), checked against the process count."""
    config = getattr(context.state, "parallelism_config", None)
    if config is None or not config.sp_enabled:
        return 1
    sp_size = int(config.sp_size)
    ulysses.check_layout(sp_size, context.state.num_processes)
    config.validate(context.state.num_processes)
    return sp_size


def _reconcile_accumulation(context: EngineContext, plugin: DeepSpeedPlugin) -> None:
    """The plugin's accumulation steps and the Accelerator's must be one number."""
    steps = plugin.gradient_accumulation_steps
    if steps in (None, AUTO_VALUE):
        return
    current = context.gradient_accumulation_steps
    if current == 1:
        context.set_gradient_accumulation_steps(int(steps))
    elif current != int(steps):
        raise ValueError(
            "the DeepSpeedPlugin / DeepSpeed config and the Accelerator must accumulate the same "
            f"number of batches; got gradient_accumulation_steps={steps} in DeepSpeed and "
            f"{current} in the Accelerator. Set one of them, or make them equal."
        )

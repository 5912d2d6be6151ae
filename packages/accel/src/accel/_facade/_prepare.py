"""The work of ``Accelerator.prepare`` and friends: place and wrap each object for the run.

Each function takes the ``Accelerator`` first and calls its other methods through it
(``acc.prepare_model``), so a subclass that overrides one is honoured."""

from __future__ import annotations

from collections.abc import Callable
from types import MethodType
from typing import TYPE_CHECKING, Any, TypeVar

import torch

from .._core._model_probes import check_quantized_placement, has_repeated_blocks, is_repeated_blocks
from .._core._optimizer_wrappers import AcceleratedOptimizer, AcceleratedScheduler
from .._core._prepared_objects import Kind, PreparedObjects
from .._core._unwrap import extract_model_from_parallel
from .._training_checkpoints._prewarm import arm_prewarm
from ._state_view import fp8_backend_of

if TYPE_CHECKING:
    from accel_state import AutocastKwargs, TorchDynamoPlugin

    from ._accelerator import Accelerator

_T = TypeVar("_T")

# The marker ``prepare`` leaves on what it returns; the reference library's name, so code that
# checks it keeps working.
PREPARED = "_is_accelerate_prepared"


def _reuse_prepared(obj: object, prepared: PreparedObjects, kind: Kind) -> bool:
    """Whether ``obj`` was already prepared (then it is registered once and returned as is)."""
    if not getattr(obj, PREPARED, False):
        return False
    prepared.add_once(kind, obj)
    return True


def _mark_prepared(obj: _T) -> _T:
    try:
        setattr(obj, PREPARED, True)
    except (AttributeError, TypeError):  # objects with __slots__ cannot carry the marker
        pass
    return obj


def _is_scheduler(obj: object) -> bool:
    return isinstance(obj, torch.optim.lr_scheduler.LRScheduler) or (
        hasattr(obj, "step") and hasattr(obj, "optimizer") and hasattr(obj, "get_last_lr")
    )


def prepare(acc: Accelerator, *args: object, device_placement: list[bool] | None = None) -> Any:
    if device_placement is None:
        device_placement = [acc.device_placement] * len(args)
    elif len(device_placement) != len(args):
        raise ValueError(
            f"device_placement needs one flag per object passed to prepare; got "
            f"{len(device_placement)} flags for {len(args)} objects."
        )
    result: list[Any] = list(args)
    done = [_reuse_prepared_object(acc, obj) for obj in args]
    if fp8_backend_of(acc.fp8_recipe_handler) == "MSAMP":
        from accel_precision import prepare_msamp_objects

        result = prepare_msamp_objects(result, acc.fp8_recipe_handler)
    # Loaders first (an engine may size itself from their batch sizes), then what the
    # engine prepares jointly (DeepSpeed: model + optimizer + scheduler), then models,
    # optimizers, and schedulers (which need the prepared optimizers).
    for i, obj in enumerate(args):
        if _kind(obj) == "loader" and not done[i]:
            result[i] = _prepare_one(acc, result[i], "loader", device_placement[i])
    fresh = [None if done[i] else obj for i, obj in enumerate(result)]
    joint = acc.engine.prepare_all(fresh)
    for i, prepared in joint.items():
        result[i] = prepared
        if isinstance(prepared, torch.nn.Module):
            acc._prepared.add_model(prepared)
    for kinds in (("model",), ("optimizer",), ("scheduler",)):
        for i, obj in enumerate(args):
            kind = _kind(obj)
            if i not in joint and not done[i] and kind is not None and kind in kinds:
                result[i] = _prepare_one(acc, result[i], kind, device_placement[i])
    for obj in result:
        if _kind(obj) is not None or isinstance(obj, AcceleratedScheduler):
            _mark_prepared(obj)
    return result[0] if len(result) == 1 else tuple(result)


def _reuse_prepared_object(acc: Accelerator, obj: object) -> bool:
    if isinstance(obj, (AcceleratedOptimizer, AcceleratedScheduler)):
        _mark_prepared(obj)
    kind = "scheduler" if isinstance(obj, AcceleratedScheduler) else _kind(obj)
    return kind is not None and _reuse_prepared(obj, acc._prepared, kind)


def _prepare_one(acc: Accelerator, obj: Any, kind: Kind, placement: bool) -> Any:
    if kind == "model":
        return acc.prepare_model(obj, device_placement=placement)
    if kind == "loader":
        return acc.prepare_data_loader(obj, device_placement=placement)
    if kind == "optimizer":
        return acc.prepare_optimizer(obj, device_placement=placement)
    return acc.prepare_scheduler(obj)


def prepare_model(
    acc: Accelerator,
    model: torch.nn.Module,
    device_placement: bool | None = None,
    evaluation_mode: bool = False,
) -> torch.nn.Module:
    from accel_precision import autocast_context, convert_outputs_to_fp32

    if _reuse_prepared(model, acc._prepared, "model"):
        return model
    if device_placement is None:
        device_placement = acc.device_placement
    check_quantized_placement(model, acc.state.device, acc.state.num_processes > 1)
    acc._prepared.add_model(model)
    registered = model
    if device_placement and not _has_device_map(model):
        model = acc.engine.place_model(model)
    if acc.fp8_recipe_handler is not None and not evaluation_mode:
        from accel_precision import convert_model_to_fp8

        acc._fp8_replaced_params.update(convert_model_to_fp8(model, acc.fp8_recipe_handler))
    if acc.native_amp and not hasattr(model, "_accel_original_forward"):
        original = model.forward
        model._accel_original_forward = original  # type: ignore[assignment]
        func = getattr(original, "__func__", original)
        precision, device_type = acc.state.mixed_precision, acc.state.device.type
        recipe = acc.fp8_recipe_handler

        def forward(module: torch.nn.Module, *a: object, **k: object) -> object:
            handler = _handler_autocast(acc)
            with autocast_context(precision, device_type, handler, recipe, module.training):
                return func(module, *a, **k)

        model.forward = MethodType(convert_outputs_to_fp32(forward), model)
    model = acc.engine.wrap_model(model, evaluation_mode)
    plugin = acc.state.dynamo_plugin
    if plugin is not None and plugin.enabled:
        model = _compile(model, plugin)
    acc._prepared.replace_model(registered, model)
    return _mark_prepared(model)


def _handler_autocast(acc: Accelerator) -> AutocastKwargs | None:
    from accel_state import AutocastKwargs

    return acc._handler(AutocastKwargs)


def prepare_optimizer(
    acc: Accelerator, optimizer: torch.optim.Optimizer, device_placement: bool | None = None
) -> AcceleratedOptimizer:
    if isinstance(optimizer, AcceleratedOptimizer):
        _reuse_prepared(_mark_prepared(optimizer), acc._prepared, "optimizer")
        return optimizer
    placement = acc.device_placement if device_placement is None else device_placement
    if acc._fp8_replaced_params:
        from accel_precision import switch_optimizer_parameters

        switch_optimizer_parameters(optimizer, acc._fp8_replaced_params)
    optimizer = acc.engine.adapt_optimizer(optimizer)
    wrapped = AcceleratedOptimizer(optimizer, device_placement=placement, scaler=acc.scaler)
    acc._prepared.add_optimizer(wrapped)
    arm_prewarm(acc._checkpointer, optimizer)
    return wrapped


def prepare_scheduler(acc: Accelerator, scheduler: object) -> AcceleratedScheduler:
    if isinstance(scheduler, AcceleratedScheduler):
        _reuse_prepared(_mark_prepared(scheduler), acc._prepared, "scheduler")
        return scheduler
    target = getattr(scheduler, "optimizer", None)
    optimizers = [
        opt for opt in acc._prepared.optimizers if opt.optimizer is target or opt is target
    ]
    if target is not None and not optimizers:
        raise ValueError(
            "prepare_scheduler needs the scheduler's optimizer to be prepared first; got a "
            "scheduler whose optimizer was not passed to prepare. Pass both to "
            "accelerator.prepare(model, optimizer, scheduler)."
        )
    wrapped = AcceleratedScheduler(
        scheduler,
        optimizers,
        step_with_optimizer=acc.step_scheduler_with_optimizer,
        split_batches=acc.dataloader_config.split_batches,
    )
    acc._prepared.add_scheduler(wrapped)
    return wrapped


def prepare_data_loader(
    acc: Accelerator,
    data_loader: torch.utils.data.DataLoader,
    device_placement: bool | None = None,
    slice_fn_for_dispatch: Callable[..., object] | None = None,
) -> Any:
    from accel_data import prepare_data_loader

    if _reuse_prepared(data_loader, acc._prepared, "loader"):
        return data_loader
    if device_placement is None:
        device_placement = acc.device_placement
    config = acc.dataloader_config
    num_replicas, replica_index = acc.engine.data_parallel_rank()
    prepared = prepare_data_loader(
        data_loader,
        acc.state.device,
        num_processes=num_replicas,
        process_index=replica_index,
        split_batches=config.split_batches,
        put_on_device=device_placement,
        rng_types=acc.rng_types,
        dispatch_batches=config.dispatch_batches,
        even_batches=config.even_batches,
        slice_fn_for_dispatch=slice_fn_for_dispatch,
        use_seedable_sampler=config.use_seedable_sampler,
        data_seed=config.data_seed,
        non_blocking=config.non_blocking,
        use_stateful_dataloader=config.use_stateful_dataloader,
    )
    acc._prepared.add_dataloader(prepared)
    return _mark_prepared(prepared)


def unwrap_model(
    acc: Accelerator,
    model: torch.nn.Module,
    keep_fp32_wrapper: bool = True,
    keep_torch_compile: bool = True,
) -> torch.nn.Module:
    return extract_model_from_parallel(
        model, keep_fp32_wrapper=keep_fp32_wrapper, keep_torch_compile=keep_torch_compile
    )


def verify_device_map(acc: Accelerator, model: torch.nn.Module) -> bool:
    return _has_device_map(model)


def _kind(obj: object) -> Kind | None:
    if isinstance(obj, torch.nn.Module):
        return "model"
    if isinstance(obj, torch.optim.Optimizer):
        return "optimizer"
    if isinstance(obj, torch.utils.data.DataLoader):
        return "loader"
    if _is_scheduler(obj):
        return "scheduler"
    return None


def _has_device_map(model: torch.nn.Module) -> bool:
    for module in model.modules():
        device_map = getattr(module, "hf_device_map", None)
        if isinstance(device_map, dict) and len(set(device_map.values())) > 1:
            return True
    return False


def _compile(model: torch.nn.Module, plugin: TorchDynamoPlugin) -> torch.nn.Module:
    skip = ("use_regional_compilation",)
    kwargs = {k: v for k, v in plugin.to_dict().items() if v is not None and k not in skip}
    if plugin.use_regional_compilation:
        return compile_regions(model, **kwargs)
    return torch.compile(model, **kwargs)  # type: ignore[return-value]


def compile_regions(module: torch.nn.Module, **compile_kwargs: Any) -> torch.nn.Module:
    """Compile ``module`` region by region: each block of a list of repeated blocks on its
    own, so the compiler compiles one block and reuses the graph for the others (a deep model
    compiles in about the time of one block).

    Returns a new module and leaves ``module`` as it was. Along the path to each list of
    repeated blocks the modules are shallow copies (they share the parameters, buffers and
    hooks, and methods bound to ``module`` are bound to the copy); each block, and each other
    submodule holding no repeated blocks, becomes ``torch.compile(submodule)``. ``module``
    itself is compiled whole when it holds no repeated blocks. The new module keeps the
    original as ``_orig_mod`` (``extract_model_from_parallel`` and ``unwrap_model`` return it).

    Args:
        module: The model to compile.
        **compile_kwargs: Arguments of ``torch.compile``.

    Returns:
        The regionally compiled module.
    """
    compiled = _compile_region(module, compile_kwargs)
    if "_orig_mod" not in compiled.__dict__:
        compiled.__dict__["_orig_mod"] = module
    return compiled


def _compile_region(module: torch.nn.Module, compile_kwargs: dict[str, Any]) -> torch.nn.Module:
    if is_repeated_blocks(module):
        blocks = module.children()
        compiled: list[Any] = [torch.compile(b, **compile_kwargs) for b in blocks]
        return torch.nn.ModuleList(compiled)
    if not has_repeated_blocks(module):
        return torch.compile(module, **compile_kwargs)  # type: ignore[return-value]
    copy = module.__class__.__new__(module.__class__)
    copy.__dict__.update(module.__dict__)
    for name, value in module.__dict__.items():
        if isinstance(value, MethodType) and value.__self__ is module:
            copy.__dict__[name] = MethodType(value.__func__, copy)
    copy._modules = {}
    for name, child in module.named_children():
        copy.add_module(name, _compile_region(child, compile_kwargs))
    return copy

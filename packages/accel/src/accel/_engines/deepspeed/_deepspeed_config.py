"""Completing a DeepSpeed config: every ``"auto"`` value filled from the run (batch sizes from
the prepared dataloaders, accumulation, clipping, ZeRO bucket sizes from the model, the
``DummyOptim`` / ``DummyScheduler`` values), and a refusal naming whatever is left."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
from accel_state import DeepSpeedPlugin

from ._deepspeed_objects import DummyOptim, DummyScheduler

if TYPE_CHECKING:
    from .._context import EngineContext

AUTO_VALUE = "auto"


def complete_config(
    acc: EngineContext,
    plugin: DeepSpeedPlugin,
    model: torch.nn.Module,
    optimizer: Any,
    scheduler: Any,
    sp_size: int,
) -> dict[str, Any]:
    """Fill the plugin's ``"auto"`` values from the run (``acc``); raise on disagreement.

    Args:
        acc: The engine's context (accumulation, processes, prepared dataloaders).
        plugin: The DeepSpeed plugin whose config is completed in place.
        model: The model (its hidden size sizes the ZeRO buckets).
        optimizer: The optimizer, a ``DummyOptim`` (its values fill the config's), or None.
        scheduler: The scheduler, a ``DummyScheduler``, or None.
        sp_size: The sequence-parallel group size (1 without Ulysses).
    """
    plugin.set_mixed_precision(acc.mixed_precision)
    config = plugin.deepspeed_config
    gas = acc.gradient_accumulation_steps
    values: dict[str, Any] = {"gradient_accumulation_steps": gas}
    micro = _micro_batch_size(acc, plugin)
    if micro is None and config.get("train_micro_batch_size_per_gpu", AUTO_VALUE) == AUTO_VALUE:
        if optimizer is not None:
            raise ValueError(
                'the DeepSpeed config\'s train_micro_batch_size_per_gpu is "auto", filled '
                "from a prepared dataloader; got none prepared. Pass the training dataloader "
                "to the same prepare call, or write the batch size in the config."
            )
        micro = 1
    # The processes of a sequence-parallel group read one batch together.
    replicas = acc.num_processes // sp_size
    if micro is not None:
        values["train_micro_batch_size_per_gpu"] = micro
        values["train_batch_size"] = micro * gas * replicas
    elif isinstance(config.get("train_micro_batch_size_per_gpu"), int):
        values["train_batch_size"] = config["train_micro_batch_size_per_gpu"] * gas * replicas
    if plugin.gradient_clipping not in (None, AUTO_VALUE):
        values["gradient_clipping"] = plugin.gradient_clipping
    elif config.get("gradient_clipping", AUTO_VALUE) == AUTO_VALUE:
        # DeepSpeed clips to 1.0 when the config is silent; no clipping unless asked for,
        # as with the other engines.
        config["gradient_clipping"] = 0.0
    if config.get("sequence_parallel_size") == AUTO_VALUE:
        values["sequence_parallel_size"] = sp_size
    values.update(_bucket_sizes(model))
    plugin.deepspeed_config_process(must_match=True, **values)
    # The placeholders' values only fill "auto" entries: a value written in the config's
    # optimizer or scheduler section wins over the placeholder's (its defaults included, as
    # transformers' Trainer builds DummyOptim(params) over a config it completed itself).
    plugin.deepspeed_config_process(must_match=False, **_placeholder_values(optimizer, scheduler))
    remaining = _auto_keys(config)
    if remaining:
        raise ValueError(
            'every "auto" value of the DeepSpeed config must be filled from the '
            f"Accelerator before deepspeed.initialize; got unfilled {remaining}. Write these "
            "values in the config (or pass what fills them: DummyOptim/DummyScheduler "
            "arguments, a dataloader, gradient_clipping)."
        )
    return config


def _placeholder_values(optimizer: Any, scheduler: Any) -> dict[str, Any]:
    """The config values a ``DummyOptim`` / ``DummyScheduler`` stands for, by dotted key."""
    values: dict[str, Any] = {}
    if isinstance(optimizer, DummyOptim):
        opt_params = {"lr": optimizer.lr, "weight_decay": optimizer.weight_decay}
        opt_params.update(optimizer.kwargs)
        values.update({f"optimizer.params.{k}": v for k, v in opt_params.items()})
    if isinstance(scheduler, DummyScheduler):
        lr = optimizer.lr if isinstance(optimizer, DummyOptim) else None
        params: dict[str, Any] = {
            "warmup_min_lr": 0,
            "warmup_max_lr": lr,
            "warmup_num_steps": scheduler.warmup_num_steps,
            "total_num_steps": scheduler.total_num_steps,
        }
        params.update(scheduler.kwargs)
        values.update({f"scheduler.params.{k}": v for k, v in params.items()})
    return values


def _micro_batch_size(context: EngineContext, plugin: DeepSpeedPlugin) -> int | None:
    sizes = []
    for loader in context.prepared.dataloaders:
        total = getattr(loader, "total_batch_size", None)
        if total:
            sizes.append(max(1, int(total) // context.num_processes))
        elif getattr(loader, "batch_size", None):
            sizes.append(int(loader.batch_size))
    if not sizes:
        return None
    return min(sizes) if plugin.is_train_batch_min else max(sizes)


def _bucket_sizes(model: torch.nn.Module) -> dict[str, Any]:
    """Bucket sizes for ``"auto"``: from the hidden size of a transformers-style config, else
    DeepSpeed's defaults."""
    config: Any = getattr(model, "config", None)
    hidden = getattr(config, "hidden_size", None)
    if hidden is None and isinstance(getattr(config, "hidden_sizes", None), (list, tuple)):
        hidden = max(config.hidden_sizes)
    if isinstance(hidden, int):
        return {
            "zero_optimization.reduce_bucket_size": hidden * hidden,
            "zero_optimization.stage3_prefetch_bucket_size": int(0.9 * hidden * hidden),
            "zero_optimization.stage3_param_persistence_threshold": 10 * hidden,
        }
    return {
        "zero_optimization.reduce_bucket_size": 500_000_000,
        "zero_optimization.stage3_prefetch_bucket_size": 50_000_000,
        "zero_optimization.stage3_param_persistence_threshold": 100_000,
    }


def _auto_keys(config: dict[str, Any], prefix: str = "") -> list[str]:
    found = []
    for key, value in config.items():
        if isinstance(value, dict):
            found.extend(_auto_keys(value, f"{prefix}{key}."))
        elif value == AUTO_VALUE:
            found.append(prefix + key)
    return found

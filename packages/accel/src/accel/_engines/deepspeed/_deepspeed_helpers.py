"""DeepSpeed helpers of the reference's public API: the active plugin, CPU optimizers, and
regional compilation of a module that DeepSpeed wraps."""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "compile_regions_deepspeed",
    "get_active_deepspeed_plugin",
    "map_pytorch_optim_to_deepspeed",
]


def get_active_deepspeed_plugin(state: Any) -> Any:
    """The `DeepSpeedPlugin` in use: the selected one when several are registered.

    Args:
        state: An `AcceleratorState` (or any object with `distributed_type` and
            `deepspeed_plugins`).

    Returns:
        The active plugin.

    Raises:
        ValueError: When the state does not run DeepSpeed.
    """
    from accel_state import DistributedType

    if state.distributed_type != DistributedType.DEEPSPEED:
        raise ValueError(
            "get_active_deepspeed_plugin needs a state that runs DeepSpeed; got distributed_type="
            f"{state.distributed_type}. Pass deepspeed_plugin=DeepSpeedPlugin(...) to the "
            "Accelerator (or launch with DeepSpeed), or select a plugin with "
            "AcceleratorState().select_deepspeed_plugin(name) first."
        )
    plugins = state.deepspeed_plugins
    if not isinstance(plugins, dict):
        return plugins
    return next((plugin for plugin in plugins.values() if plugin.selected), None) or next(
        iter(plugins.values())
    )


def _bnb_32bit(optimizer: Any, names: tuple[str, ...]) -> bool:
    """Whether `optimizer` is one of the bitsandbytes classes `names`, in 32-bit mode."""
    from accel_state import is_bnb_available

    if not is_bnb_available():
        return False
    import bitsandbytes.optim as bnb_optim

    classes = tuple(getattr(bnb_optim, name) for name in names if hasattr(bnb_optim, name))
    if not classes or not isinstance(optimizer, classes):
        return False
    bits = getattr(optimizer, "optim_bits", None)
    if bits is None:
        bits = getattr(getattr(optimizer, "args", None), "optim_bits", None)
    return bits == 32


def _deepspeed_class(optimizer: torch.optim.Optimizer) -> tuple[type, dict[str, Any]]:
    """DeepSpeed's CPU optimizer class for `optimizer`, and its extra constructor arguments."""
    if isinstance(optimizer, torch.optim.AdamW) or _bnb_32bit(optimizer, ("AdamW", "AdamW32bit")):
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam, {"adamw_mode": True}
    if type(optimizer) is torch.optim.Adam or _bnb_32bit(optimizer, ("Adam", "Adam32bit")):
        from deepspeed.ops.adam import DeepSpeedCPUAdam

        return DeepSpeedCPUAdam, {"adamw_mode": False}
    if isinstance(optimizer, torch.optim.Adagrad) or _bnb_32bit(
        optimizer, ("Adagrad", "Adagrad32bit")
    ):
        from deepspeed.ops.adagrad import DeepSpeedCPUAdagrad

        return DeepSpeedCPUAdagrad, {}
    if _bnb_32bit(optimizer, ("Lion", "Lion32bit")):
        from deepspeed.ops.lion import DeepSpeedCPULion

        return DeepSpeedCPULion, {}
    raise ValueError(
        "map_pytorch_optim_to_deepspeed maps torch.optim.Adam, AdamW and Adagrad (and the 32-bit "
        "bitsandbytes Adam, AdamW, Adagrad and Lion) to DeepSpeed's CPU optimizers; got "
        f"{type(optimizer).__module__}.{type(optimizer).__name__}, which has no DeepSpeed CPU "
        "counterpart (converting it to Adam would change the training). Use one of those "
        "optimizers, or let DeepSpeed build the optimizer from the `optimizer` section of its "
        "config."
    )


def map_pytorch_optim_to_deepspeed(optimizer: torch.optim.Optimizer) -> torch.optim.Optimizer:
    """The DeepSpeed CPU optimizer (`deepspeed.ops`) that does what `optimizer` does.

    Adam becomes `DeepSpeedCPUAdam` (L2 weight decay), AdamW `DeepSpeedCPUAdam` with
    `adamw_mode=True` (decoupled weight decay), Adagrad `DeepSpeedCPUAdagrad`, 32-bit
    bitsandbytes Lion `DeepSpeedCPULion`. The new optimizer holds the same parameter groups
    (with their own learning rates, betas, eps and weight decay).

    Args:
        optimizer: A torch (or 32-bit bitsandbytes) optimizer.

    Returns:
        The DeepSpeed CPU optimizer over the same parameters.

    Raises:
        ValueError: For an optimizer with no DeepSpeed CPU counterpart, or a setting the
            DeepSpeed one does not have (`amsgrad=True`).
    """
    amsgrad = [i for i, group in enumerate(optimizer.param_groups) if group.get("amsgrad")]
    if amsgrad:
        raise ValueError(
            "DeepSpeed's CPU Adam has no AMSGrad variant; got amsgrad=True in parameter "
            f"group(s) {amsgrad} of {type(optimizer).__name__}. Build the optimizer with "
            "amsgrad=False, or keep it off DeepSpeed's CPU optimizers."
        )
    optimizer_class, extra = _deepspeed_class(optimizer)
    defaults = {k: v for k, v in optimizer.defaults.items() if k in ("lr", "weight_decay")}
    return optimizer_class(optimizer.param_groups, **defaults, **extra)


def _is_block_list(module: torch.nn.Module) -> bool:
    """A non-empty `nn.ModuleList` whose items are all of the first item's class."""
    return (
        isinstance(module, torch.nn.ModuleList)
        and len(module) > 0
        and all(isinstance(item, type(module[0])) for item in module)
    )


def compile_regions_deepspeed(module: torch.nn.Module, **compile_kwargs: Any) -> None:
    """Compile `module` region by region in place, for the module a `DeepSpeedEngine` wraps.

    Each block of a list of identical blocks is compiled on its own (they share one compiled
    graph); a module that holds such a list somewhere below it is walked child by child; any
    other module is compiled whole. Compiling uses the in-place `nn.Module.compile`, which
    keeps DeepSpeed's hooks on the call path.

    Args:
        module: The model (e.g. `engine.module`).
        **compile_kwargs: Passed to `nn.Module.compile` (e.g. `backend="eager"`).
    """
    if _is_block_list(module):
        for block in module.children():
            block.compile(**compile_kwargs)
    elif any(_is_block_list(sub) for sub in module.modules()):
        for child in module.children():
            compile_regions_deepspeed(child, **compile_kwargs)
    else:
        module.compile(**compile_kwargs)

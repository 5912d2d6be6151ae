"""Hooks around ``forward``: attach and remove them, and keep a whole model on the CPU between
calls ([`CpuOffload`][accel_bigmodel.CpuOffload]).

The hook that places inputs and weights on the execution device is in ``_align_devices``.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, cast

import torch
from torch import nn

from ..placement._tensors import Device, send_to_device

_INSTANCE_FORWARD = "_accel_instance_forward"


class ModelHook:
    """Callbacks run around a module's ``forward`` once attached with [`add_hook_to_module`][accel_bigmodel.add_hook_to_module].

    Attributes:
        no_grad: Run the wrapped ``forward`` under ``torch.no_grad()``.
    """

    no_grad = False

    def init_hook(self, module: nn.Module) -> nn.Module:
        """Called when the hook is attached; returns the module."""
        return module

    def pre_forward(self, module: nn.Module, *args: Any, **kwargs: Any) -> tuple[tuple, dict]:
        """Called before ``forward``; returns the (possibly changed) ``args`` and ``kwargs``."""
        return args, kwargs

    def post_forward(self, module: nn.Module, output: Any) -> Any:
        """Called after ``forward``; returns the (possibly changed) output."""
        return output

    def detach_hook(self, module: nn.Module) -> nn.Module:
        """Called when the hook is removed; returns the module."""
        return module


class SequentialHook(ModelHook):
    """Runs several hooks in order (``post_forward`` in the same order as ``pre_forward``)."""

    def __init__(self, *hooks: ModelHook) -> None:
        self.hooks = hooks

    def init_hook(self, module: nn.Module) -> nn.Module:
        for hook in self.hooks:
            module = hook.init_hook(module)
        return module

    def pre_forward(self, module: nn.Module, *args: Any, **kwargs: Any) -> tuple[tuple, dict]:
        for hook in self.hooks:
            args, kwargs = hook.pre_forward(module, *args, **kwargs)
        return args, kwargs

    def post_forward(self, module: nn.Module, output: Any) -> Any:
        for hook in self.hooks:
            output = hook.post_forward(module, output)
        return output

    def detach_hook(self, module: nn.Module) -> nn.Module:
        for hook in self.hooks:
            module = hook.detach_hook(module)
        return module


def _hooked_forward(module: nn.Module, *args: Any, **kwargs: Any) -> Any:
    # nn.Module types unknown attributes as ``Tensor | Module``; these two are set below.
    hook = cast(ModelHook, module._hf_hook)
    old_forward = cast("Callable[..., Any]", module._old_forward)
    args, kwargs = hook.pre_forward(module, *args, **kwargs)
    if hook.no_grad:
        with torch.no_grad():
            output = old_forward(*args, **kwargs)
    else:
        output = old_forward(*args, **kwargs)
    return hook.post_forward(module, output)


def add_hook_to_module(module: nn.Module, hook: ModelHook, append: bool = False) -> nn.Module:
    """Wraps ``module.forward`` with ``hook`` (replacing an existing hook unless ``append``).

    The hook is stored as ``module._hf_hook`` and the original forward as
    ``module._old_forward``.

    Args:
        module: The module to hook.
        hook: The hook to attach.
        append: Chain after an existing hook with a [`SequentialHook`][accel_bigmodel.SequentialHook].

    Returns:
        The module (as returned by ``hook.init_hook``).
    """
    if append and getattr(module, "_hf_hook", None) is not None:
        existing = cast(ModelHook, module._hf_hook)
        remove_hook_from_module(module)
        hook = SequentialHook(existing, hook)
    old_forward: Callable[..., Any]
    if hasattr(module, "_hf_hook") and hasattr(module, "_old_forward"):
        old_forward = cast("Callable[..., Any]", module._old_forward)
    else:
        object.__setattr__(module, _INSTANCE_FORWARD, "forward" in module.__dict__)
        old_forward = module.forward
        module._old_forward = old_forward  # type: ignore[assignment]  # see below
    module = hook.init_hook(module)
    # torch types a module attribute as ``Tensor | Module``; a hook is plain Python state.
    module._hf_hook = hook  # type: ignore[assignment]
    wrapped = functools.partial(_hooked_forward, module)
    try:
        functools.update_wrapper(wrapped, old_forward)
    except (AttributeError, TypeError):
        pass
    module.forward = wrapped
    return module


def remove_hook_from_module(module: nn.Module, recurse: bool = False) -> nn.Module:
    """Removes the hook of ``module`` (calling its ``detach_hook``) and restores ``forward``.

    Args:
        module: The module to clean.
        recurse: Also clean every submodule.

    Returns:
        The module.
    """
    hook = getattr(module, "_hf_hook", None)
    if hook is not None:
        hook.detach_hook(module)
    if "_hf_hook" in module.__dict__:
        del module.__dict__["_hf_hook"]
    if "_old_forward" in module.__dict__:
        old_forward = module.__dict__.pop("_old_forward")
        if module.__dict__.pop(_INSTANCE_FORWARD, False):
            module.forward = old_forward
        else:
            module.__dict__.pop("forward", None)
    if recurse:
        for child in module.children():
            remove_hook_from_module(child, recurse=True)
    return module


def remove_hook_from_submodules(module: nn.Module) -> None:
    """Removes the hooks of ``module`` and all its submodules."""
    remove_hook_from_module(module, recurse=True)


class CpuOffload(ModelHook):
    """Keeps a whole model on the CPU and moves it to the execution device for each forward.

    Args:
        execution_device: Device the forward runs on (the first accelerator, else the CPU).
        prev_module_hook: Hook of the model that runs before; it is offloaded first.
    """

    def __init__(
        self,
        execution_device: Device | None = None,
        prev_module_hook: UserCpuOffloadHook | None = None,
    ) -> None:
        self.prev_module_hook = prev_module_hook
        if execution_device is None:
            execution_device = "cuda:0" if torch.cuda.is_available() else "cpu"
        self.execution_device = execution_device

    def init_hook(self, module: nn.Module) -> nn.Module:
        return module.to("cpu")

    def pre_forward(self, module: nn.Module, *args: Any, **kwargs: Any) -> tuple[tuple, dict]:
        if self.prev_module_hook is not None:
            self.prev_module_hook.offload()
        module.to(self.execution_device)
        return send_to_device(args, self.execution_device), send_to_device(
            kwargs, self.execution_device
        )


class UserCpuOffloadHook:
    """Handle returned by [`cpu_offload_with_hook`][accel_bigmodel.cpu_offload_with_hook] to offload or unhook a model.

    Args:
        model: The hooked model.
        hook: Its [`CpuOffload`][accel_bigmodel.CpuOffload] hook.
    """

    def __init__(self, model: nn.Module, hook: CpuOffload) -> None:
        self.model = model
        self.hook = hook

    def offload(self) -> None:
        """Moves the model back to the CPU."""
        self.hook.init_hook(self.model)

    def remove(self) -> None:
        """Removes the hook from the model."""
        remove_hook_from_module(self.model)

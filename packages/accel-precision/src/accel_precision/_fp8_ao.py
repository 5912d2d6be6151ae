"""FP8 training with torchao: swap chosen ``nn.Linear`` layers for ``Float8Linear``."""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ._optional_backends import require_torchao


def find_first_last_linear_layers(model: torch.nn.Module) -> tuple[str | None, str | None]:
    """Names of the first and the last ``nn.Linear`` of ``model`` in module order.

    Args:
        model: Any module.

    Returns:
        ``(first, last)``; both None when the model has no linear layer.
    """
    first = last = None
    for name, module in model.named_modules():
        if isinstance(module, torch.nn.Linear):
            if first is None:
                first = name
            last = name
    return first, last


def _matches(name: str, patterns: Sequence[str]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in patterns)


def filter_linear_layers(
    module: torch.nn.Module, fqn: str, layers_to_filter: Sequence[str]
) -> bool:
    """Whether torchao should convert ``module``: an ``nn.Linear`` whose dimensions are both
    multiples of 16 (what ``torch._scaled_mm`` accepts) and whose name is not filtered.

    Args:
        module: The candidate module.
        fqn: Its fully qualified name in the model.
        layers_to_filter: Names (or prefixes of names) to keep in high precision.
    """
    if not isinstance(module, torch.nn.Linear):
        return False
    if module.in_features % 16 or module.out_features % 16:
        return False
    return not _matches(fqn, [name for name in layers_to_filter if name])


def filter_first_and_last_linear_layers(module: torch.nn.Module, fqn: str) -> bool:
    """A ``module_filter_func`` for one linear layer checked on its own: its first and last
    linear sublayers are kept (use `ao_module_filter` to filter a whole model)."""
    first, last = find_first_last_linear_layers(module)
    return filter_linear_layers(module, fqn, [n for n in (first, last) if n])


def ao_module_filter(
    model: torch.nn.Module,
    skip_first_last: bool = True,
    skip_modules: Sequence[str] | None = None,
) -> Callable[[torch.nn.Module, str], bool]:
    """The default choice of layers to convert for ``model``.

    Args:
        model: The model about to be converted.
        skip_first_last: Keep its first and last linear layers in high precision.
        skip_modules: Further names (or prefixes) to keep in high precision.
    """
    keep = list(skip_modules or [])
    if skip_first_last:
        keep.extend(n for n in find_first_last_linear_layers(model) if n is not None)
    return functools.partial(filter_linear_layers, layers_to_filter=keep)


def has_ao_layers(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds torchao ``Float8Linear`` layers."""
    float8 = require_torchao("has_ao_layers")
    linear_cls = float8.float8_linear.Float8Linear
    return any(isinstance(m, linear_cls) for m in model.modules())


def convert_model_to_fp8_ao(
    model: torch.nn.Module,
    config: Any = None,
    module_filter_func: Callable[[torch.nn.Module, str], bool] | None = None,
) -> torch.nn.Module:
    """Convert linear layers of ``model`` to torchao ``Float8Linear`` in place.

    Args:
        model: The model (its weights stay the same parameters unless the config enables FSDP
            float8 all-gather, which wraps them).
        config: A ``Float8LinearConfig`` (torchao's tensor-wise default when None).
        module_filter_func: ``(module, fqn) -> bool``; by default all eligible linear layers
            except the first and the last.

    Returns:
        ``model``.
    """
    float8 = require_torchao("convert_model_to_fp8_ao")
    if module_filter_func is None:
        module_filter_func = ao_module_filter(model)
    if float8.float8_linear.Float8Linear in {type(m) for m in model.modules()}:
        return model
    float8.convert_to_float8_training(model, module_filter_fn=module_filter_func, config=config)
    return model

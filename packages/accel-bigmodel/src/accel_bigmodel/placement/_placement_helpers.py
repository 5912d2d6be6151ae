"""Small helpers around device-map placement: tied weights, leaf modules, and finding a
module that fits a size limit."""

from __future__ import annotations

import enum
import inspect
import logging
from collections.abc import Mapping, Sequence
from typing import Any, Union

import torch
from torch import nn

from ._device_map_use import mapped_device
from ._size_text import convert_file_size_to_int

logger = logging.getLogger("accel_bigmodel.modeling")


class CustomDtype(enum.Enum):
    """Storage types torch has no ``torch.dtype`` for, accepted wherever a dtype sizes memory
    (``infer_auto_device_map(dtype=...)``, ``dtype_byte_size``): 8-bit floats, 4-bit and
    2-bit integers."""

    FP8 = "fp8"
    INT4 = "int4"
    INT2 = "int2"


def check_tied_parameters_in_config(model: nn.Module) -> bool:
    """Whether a ``transformers`` model's config asks for tied weights.

    True when the model (a ``PreTrainedModel``, recognised by its class hierarchy, so
    transformers need not be imported) ties its word embeddings to an output layer, ties encoder
    and decoder, or holds a module with a ``_tie_weights`` method. Any other module gives False.

    Args:
        model: The model to inspect.
    """
    if "PreTrainedModel" not in {cls.__name__ for cls in inspect.getmro(type(model))}:
        return False
    config = getattr(model, "config", None)
    text_config = config
    if config is not None and hasattr(config, "get_text_config"):
        text_config = config.get_text_config(decoder=True)
    get_output = getattr(model, "get_output_embeddings", None)
    tied_embeddings = bool(
        text_config is not None
        and getattr(text_config, "tie_word_embeddings", False)
        and callable(get_output)
        and get_output() is not None
    )
    tied_encoder_decoder = bool(
        getattr(config, "is_encoder_decoder", False)
        and getattr(config, "tie_encoder_decoder", False)
    )
    tied_module = any(hasattr(module, "_tie_weights") for module in model.modules())
    return tied_embeddings or tied_encoder_decoder or tied_module


def check_tied_parameters_on_same_device(
    tied_params: Sequence[Sequence[str]], device_map: Mapping[str, Any]
) -> None:
    """Warn (logger ``accel_bigmodel``) for each group of tied parameters that ``device_map``
    spreads over several devices: a tied weight must live in one place.

    Args:
        tied_params: Groups of parameter names tied together (as ``find_tied_parameters``).
        device_map: Module name -> device, as ``infer_auto_device_map`` returns.
    """
    for group in tied_params:
        devices = {name: mapped_device(device_map, name) for name in group}
        if len({str(device) for device in devices.values()}) > 1:
            logger.warning(
                "Tied parameters must be on one device; the device map puts them on %s. Put "
                "the modules that hold them on the same device in your device_map, or use "
                "device_map='auto'.",
                devices,
            )


def get_module_leaves(module_sizes: Mapping[str, int]) -> list[str]:
    """The names in ``module_sizes`` that have no child in it (the root ``""`` excluded).

    Args:
        module_sizes: Module and tensor names -> sizes (as ``compute_module_sizes``).
    """
    parents = {name.rsplit(".", 1)[0] for name in module_sizes if "." in name}
    return [name for name in module_sizes if name and name not in parents]


def _inside(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(f"{prefix}.")


def _children(module: Any) -> list[tuple[str, Any]]:
    if isinstance(module, torch.Tensor):
        return []
    return list(module.named_parameters(recurse=False)) + list(module.named_children())


def _size_with_ties(
    name: str,
    module_sizes: Mapping[str, int],
    tied_parameters: Sequence[Sequence[str]],
    candidates: Sequence[tuple[str, Any]],
) -> int:
    """Size of ``name`` plus the modules among ``candidates`` that hold weights tied to it."""
    total = module_sizes[name]
    owners: set[str] = set()
    for group in tied_parameters:
        inside = [p for p in group if _inside(p, name)]
        if not inside or len(inside) == len(group):
            continue
        for param in group:
            if _inside(param, name):
                continue
            owner = next((n for n, _ in candidates if _inside(param, n)), None)
            if owner is not None and owner not in owners:
                owners.add(owner)
                total += module_sizes[owner] - module_sizes.get(param, 0)
    return total


def fallback_allocate(
    modules: list[tuple[str, nn.Module]],
    module_sizes: dict[str, int],
    size_limit: Union[int, str],
    no_split_module_classes: list[str] | None = None,
    tied_parameters: list[list[str]] | None = None,
) -> tuple[str | None, nn.Module | None, list[tuple[str, nn.Module]]]:
    """Find, breadth first, one module (or parameter) of ``modules`` that fits ``size_limit``.

    A module too big is split into its direct parameters and children, unless its class is in
    ``no_split_module_classes`` or it has no submodule (a leaf layer is never split). Weights tied to the candidate and held elsewhere count in its
    size.

    Args:
        modules: ``(name, module)`` pairs still to place.
        module_sizes: Sizes of every module and tensor (as ``compute_module_sizes``).
        size_limit: Bytes, or a string like ``"2GB"``.
        no_split_module_classes: Class names never split.
        tied_parameters: Groups of tied parameter names.

    Returns:
        ``(name, module, remaining)``: the module found and ``modules`` without it (its parents
        replaced by their other children), or ``(None, None, modules)`` when nothing fits.

    Raises:
        ValueError: ``size_limit`` is not a size.
    """
    limit = convert_file_size_to_int(size_limit)
    no_split = set(no_split_module_classes or [])
    ties = tied_parameters or []
    queue = list(modules)
    found: tuple[str, Any] | None = None
    while queue:
        name, module = queue.pop(0)
        if _size_with_ties(name, module_sizes, ties, queue) <= limit:
            found = (name, module)
            break
        # A module with submodules is split into its own parameters and its submodules; a
        # leaf layer (no submodule) stays whole.
        has_submodules = not isinstance(module, torch.Tensor) and any(
            True for _ in module.children()
        )
        if has_submodules and type(module).__name__ not in no_split:
            queue = [(f"{name}.{n}", child) for n, child in _children(module)] + queue
    if found is None:
        return None, None, modules
    name = found[0]
    remaining = list(modules)
    while name not in [n for n, _ in remaining]:
        index, (parent, parent_module) = next(
            (i, pair) for i, pair in enumerate(remaining) if _inside(name, pair[0])
        )
        expanded = [(f"{parent}.{n}", child) for n, child in _children(parent_module)]
        remaining = remaining[:index] + expanded + remaining[index + 1 :]
    index = [n for n, _ in remaining].index(name)
    found_name, found_module = remaining.pop(index)
    return found_name, found_module, remaining

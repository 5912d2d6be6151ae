"""Preparing a state dict for safetensors, and where a module's weights are."""

from __future__ import annotations

import logging
from typing import Any

import torch
from torch import nn

from ._weights_io import find_tied_storages

logger = logging.getLogger("accel_bigmodel.modeling")


def clean_state_dict_for_safetensors(state_dict: dict[str, Any]) -> dict[str, Any]:
    """Drop the aliases of shared tensors and make every tensor contiguous, as safetensors needs.

    Of the names that share one storage (tied weights), the first in the state dict's order is
    kept and the others are removed, with a warning that names them (logger ``accel_bigmodel``).
    Values that are not tensors (strings of quantization metadata) are kept as they are.

    Args:
        state_dict: A model's state dict; the aliases are removed from it in place.

    Returns:
        A new dict with the kept entries, tensors contiguous.
    """
    removed = list(find_tied_storages(state_dict, same_view=False))
    for name in removed:
        del state_dict[name]
    if removed:
        logger.warning(
            "Removed %s from the state dict: they share memory with another entry (tied "
            "weights) and safetensors stores each tensor once. Re-tie them after loading "
            "(e.g. model.tie_weights()).",
            sorted(removed),
        )
    return {
        name: value.contiguous() if isinstance(value, torch.Tensor) else value
        for name, value in state_dict.items()
    }


def get_parameter_device(parameter: nn.Module) -> torch.device:
    """The device of the first parameter of ``parameter`` (a module).

    Raises:
        ValueError: the module has no parameter.
    """
    first = next(parameter.parameters(), None)
    if first is None:
        raise ValueError(
            f"get_parameter_device needs a module with at least one parameter; "
            f"{type(parameter).__name__} has none. Pass the module that holds the weights."
        )
    return first.device

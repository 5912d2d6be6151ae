"""Build model skeletons without allocating their weights."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Union

import torch
from torch import nn

from .._bigmodel_variables import ACCEL_INIT_INCLUDE_BUFFERS


def _moved_parameter(param: nn.Parameter, device: torch.device) -> nn.Parameter:
    param_cls = type(param)
    extra = dict(param.__dict__)
    if param_cls is nn.Parameter or not extra:
        moved = param_cls(param.to(device), requires_grad=param.requires_grad)
        moved.__dict__.update(extra)
        return moved
    # Subclasses (quantized parameters) take their attributes as constructor arguments.
    return param_cls(param.to(device), requires_grad=param.requires_grad, **extra)


@contextmanager
def init_empty_weights(include_buffers: bool | None = None) -> Iterator[None]:
    """Context manager in which every new parameter is created on the meta device.

    Building a model inside it allocates no memory for weights, so the skeleton of a model of
    any size builds in a fraction of a second. Load real values later with
    [`load_checkpoint_and_dispatch`][accel_bigmodel.load_checkpoint_and_dispatch] or [`load_checkpoint_in_model`][accel_bigmodel.load_checkpoint_in_model].

    Args:
        include_buffers: Also put buffers on the meta device. Defaults to ``False`` (or to the
            environment variable ``ACCEL_INIT_INCLUDE_BUFFERS``, or the reference's
            ``ACCELERATE_INIT_INCLUDE_BUFFERS``, when set).

    Example:
        >>> with init_empty_weights():
        ...     model = nn.Sequential(*[nn.Linear(10_000, 10_000) for _ in range(1000)])
    """
    if include_buffers is None:
        include_buffers = ACCEL_INIT_INCLUDE_BUFFERS.read()
    with init_on_device(torch.device("meta"), include_buffers=include_buffers):
        yield


@contextmanager
def init_on_device(
    device: Union[torch.device, str, int], include_buffers: bool | None = None
) -> Iterator[None]:
    """Context manager in which every new parameter (and optionally buffer) goes to ``device``.

    Parameters keep their class (``nn.Parameter`` subclasses survive) and ``requires_grad``.

    Args:
        device: The device to create tensors on (``"meta"`` allocates nothing).
        include_buffers: Also move buffers registered inside the context. Defaults to ``False``
            (or the ``ACCEL_INIT_INCLUDE_BUFFERS`` / ``ACCELERATE_INIT_INCLUDE_BUFFERS`` environment
            variable).

    Example:
        >>> with init_on_device(torch.device("meta")):
        ...     layer = nn.Linear(4, 4)
        >>> layer.weight.device
        device(type='meta')
    """
    if include_buffers is None:
        include_buffers = ACCEL_INIT_INCLUDE_BUFFERS.read()
    target = torch.device(device)
    if include_buffers:
        # The default-device context also covers buffers and tensors made in __init__.
        with target:
            yield
        return

    original_register_parameter = nn.Module.register_parameter

    def register_parameter(module: nn.Module, name: str, param: nn.Parameter | None) -> None:
        original_register_parameter(module, name, param)
        if param is None:
            return
        current = module._parameters[name]
        if current is None or current.device == target:
            return
        module._parameters[name] = _moved_parameter(current, target)

    nn.Module.register_parameter = register_parameter  # type: ignore[method-assign, assignment]
    try:
        yield
    finally:
        nn.Module.register_parameter = original_register_parameter  # type: ignore[method-assign]

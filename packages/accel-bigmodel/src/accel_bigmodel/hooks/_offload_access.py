"""Reading the weights of an offloaded model: bring a module's weights in for a while, or
collect the whole state dict on the CPU."""

from __future__ import annotations

import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Union

import torch
from torch import nn

if TYPE_CHECKING:
    from ._align_devices import AlignDevicesHook

_logger = logging.getLogger("accel_bigmodel.offload")

Device = Union[int, str, torch.device]


def has_offloaded_params(module: nn.Module) -> bool:
    """Whether ``module`` holds weights offloaded by an [`AlignDevicesHook`][accel_bigmodel.AlignDevicesHook].

    Such a module keeps its offloaded parameters on the meta device outside its forward.
    """
    hook = getattr(module, "_hf_hook", None)
    if hook is None:
        return False
    # Imported only for a hooked module: asking about a plain model (a checkpoint's save or
    # load) loads none of the hook and placement code.
    from ._align_devices import AlignDevicesHook

    return isinstance(hook, AlignDevicesHook) and bool(hook.offload)


@contextmanager
def align_module_device(
    module: nn.Module, execution_device: Device | None = None
) -> Iterator[None]:
    """Inside the block, the module's own parameters are real tensors on one device.

    For an offloaded module the hook loads its weights (on ``execution_device`` when given,
    else on the hook's execution device) and offloads them again on exit. For a plain module
    with ``execution_device``, its direct parameters move there and back. Otherwise nothing
    changes.

    Args:
        module: The module whose parameters to align.
        execution_device: Where the parameters should be inside the block.

    Example:
        >>> with align_module_device(layer, "cpu"):
        ...     weight = layer.weight.clone()
    """
    if has_offloaded_params(module):
        hook: AlignDevicesHook = module._hf_hook  # type: ignore[assignment]
        original = hook.execution_device
        if execution_device is not None:
            hook.execution_device = execution_device
        try:
            hook.pre_forward(module)
            yield
        finally:
            hook.post_forward(module, None)
            hook.execution_device = original
    elif execution_device is not None:
        from ..placement._tensors import set_module_tensor_to_device

        devices = {name: p.device for name, p in module.named_parameters(recurse=False)}
        try:
            for name in devices:
                set_module_tensor_to_device(module, name, execution_device)
            yield
        finally:
            for name, device in devices.items():
                set_module_tensor_to_device(module, name, device)
    else:
        yield


def get_state_dict_offloaded_model(model: nn.Module) -> dict[str, torch.Tensor]:
    """Return the full state dict of a model whose modules may be offloaded, on the CPU.

    Each module's weights are brought to the CPU one module at a time, so only one module's
    offloaded weights are loaded at once. Tensors still on the meta device (never
    materialised) are left out with a warning naming them.

    Raises:
        MemoryError: if a module's weights do not fit in CPU memory.
    """
    state_dict: dict[str, torch.Tensor] = {}
    placeholders: set[str] = set()
    for name, module in model.named_modules():
        try:
            # Only offloaded modules need loading; the others' tensors are copied below.
            device = "cpu" if has_offloaded_params(module) else None
            with align_module_device(module, device):
                module_state = module.state_dict()
        except MemoryError:
            raise MemoryError(
                f"get_state_dict_offloaded_model: the weights of module {name!r} must fit in CPU "
                "memory to be collected; they do not. Free CPU memory or save the model's "
                "modules one by one."
            ) from None
        for key, tensor in module_state.items():
            if not name and "." in key:
                continue  # the root contributes its own tensors; each child comes in its turn
            full = f"{name}.{key}" if name else key
            if tensor.device.type == "meta":
                placeholders.add(full)
            else:
                state_dict[full] = tensor.to("cpu")
    missing = placeholders - state_dict.keys()
    if missing:
        _logger.warning(
            "These tensors were left out because they are still on the meta device: %s",
            sorted(missing),
        )
    return state_dict


def get_state_dict_from_offload(
    module: nn.Module,
    module_name: str,
    state_dict: dict[str, Any],
    device_to_put_offload: Device = "cpu",
) -> dict[str, Any]:
    """Fill ``state_dict`` with the real weights of ``module`` (offloaded or not).

    Args:
        module: The module owning the tensor ``module_name``.
        module_name: The full name of one of the module's tensors (``"layer.0.weight"``); its
            prefix (``"layer.0"``) names the module in ``state_dict``.
        state_dict: A state dict whose keys under that prefix are replaced by the module's
            tensors (other keys are left alone).
        device_to_put_offload: Where an offloaded module's weights are loaded.

    Returns:
        ``state_dict``, updated in place.
    """
    root = module_name.rpartition(".")[0]
    device = device_to_put_offload if has_offloaded_params(module) else None
    with align_module_device(module, device):
        for key, tensor in module.state_dict().items():
            full = f"{root}.{key}"
            if full in state_dict:
                state_dict[full] = tensor
    return state_dict


def get_module_size_with_ties(
    tied_params: Sequence[str],
    module_size: int,
    module_sizes: Mapping[str, int],
    modules_to_treat: Sequence[tuple[str, nn.Module]],
) -> tuple[int, list[str], list[nn.Module]]:
    """Size of a module together with the modules that hold parameters tied to it.

    Args:
        tied_params: Names of the parameters tied to the module's parameters.
        module_size: The module's own size in bytes.
        module_sizes: Sizes of every module and tensor (as [`compute_module_sizes`][accel_bigmodel.compute_module_sizes]).
        modules_to_treat: ``(name, module)`` pairs still to be placed; each tied parameter
            must belong to one of them.

    Returns:
        ``(size with the tied modules, their names, the modules)``; the size counts each tied
        parameter once.

    Raises:
        ValueError: if a tied parameter belongs to none of ``modules_to_treat``.
    """
    names: list[str] = []
    modules: list[nn.Module] = []
    total = module_size
    for param in tied_params:
        owner = next(((n, m) for n, m in modules_to_treat if param.startswith(f"{n}.")), None)
        if owner is None:
            raise ValueError(
                f"get_module_size_with_ties: tied parameter {param!r} belongs to none of the "
                f"modules to place ({[n for n, _ in modules_to_treat]}). Pass the module that "
                "holds it in modules_to_treat."
            )
        names.append(owner[0])
        modules.append(owner[1])
        total += module_sizes[owner[0]] - module_sizes[param]
    return total, names, modules

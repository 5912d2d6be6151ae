"""Placing single tensors of a module, tied parameters, moving nested inputs between devices."""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any, Union, cast

import torch
from torch import nn

from ._devices import accelerator_type
from ._sizes import resolve_dtype

Device = Union[int, str, torch.device]


def normalize_device(device: Device) -> torch.device:
    """Turns ``0``, ``"cuda:0"``, ``"cpu"`` ... into a ``torch.device`` (ints are accelerators)."""
    if isinstance(device, torch.device):
        return device
    if isinstance(device, int) and not isinstance(device, bool):
        return torch.device(accelerator_type() or "cuda", device)
    return torch.device(device)


def get_submodule_and_name(module: nn.Module, tensor_name: str) -> tuple[nn.Module, str]:
    """Resolves ``"a.b.weight"`` to ``(module.a.b, "weight")`` with a clear error on a bad path."""
    *path, leaf = tensor_name.split(".")
    current = module
    walked: list[str] = []
    for part in path:
        child = (
            current._modules.get(part) if part in current._modules else getattr(current, part, None)
        )
        if not isinstance(child, nn.Module):
            where = ".".join(walked) or "the model"
            raise ValueError(
                f"A tensor name must be a dotted path of submodules ending in a parameter or buffer; "
                f"{where} has no submodule {part!r} (in {tensor_name!r}). Check the name against "
                f"model.state_dict().keys()."
            )
        walked.append(part)
        current = child
    return current, leaf


def set_module_tensor_to_device(
    module: nn.Module,
    tensor_name: str,
    device: Device,
    value: torch.Tensor | None = None,
    dtype: Union[str, torch.dtype, None] = None,
    fp16_statistics: torch.Tensor | None = None,
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None = None,
    non_blocking: bool = False,
    clear_cache: bool = True,
) -> None:
    """Sets one parameter or buffer of a module on ``device``, optionally with a new value.

    ``param.to(device)`` would build a tensor unknown to the module; this replaces the entry in
    the owning module so the model sees it. Parameters keep their class and ``requires_grad``.

    Args:
        module: The module holding the tensor (at any depth).
        tensor_name: Full dotted name of the parameter or buffer.
        device: Target device (``"meta"`` frees the storage).
        value: New value (required when the tensor is on the meta device and ``device`` is not).
        dtype: Cast a floating-point ``value`` to this dtype. When ``None``, ``value`` is cast to
            the dtype of the tensor it replaces.
        fp16_statistics: Accepted for API compatibility with 8-bit serialization; stored as the
            parameter's ``SCB`` attribute when given.
        tied_params_map: ``data_ptr -> {device: tensor}`` of weights already placed, so a tied
            weight is placed once per device and shared.
        non_blocking: Asynchronous host-to-device copy where possible.
        clear_cache: Accepted for API compatibility (no device cache is cleared on CPU).

    Raises:
        ValueError: On an unknown name, a shape mismatch, or a meta tensor with no ``value``.
    """
    owner, name = get_submodule_and_name(module, tensor_name)
    if name not in owner._parameters and name not in owner._buffers:
        raise ValueError(
            f"{tensor_name!r} must name a parameter or buffer; {type(owner).__name__} has neither "
            f"named {name!r}. Check the name against model.state_dict().keys()."
        )
    is_buffer = name in owner._buffers
    old = owner._buffers[name] if is_buffer else owner._parameters[name]
    if old is None:
        raise ValueError(f"{tensor_name!r} is None in the model and cannot be placed on a device.")
    target = normalize_device(device)

    if tied_params_map is not None and not is_buffer:
        for ptr_source in (value, old):
            if ptr_source is None or ptr_source.device.type == "meta":
                continue
            placed = tied_params_map.get(ptr_source.data_ptr())
            if placed is not None and target in placed:
                # Only parameters are placed through the tied map, so the entry is one.
                owner._parameters[name] = cast(nn.Parameter, placed[target])
                return

    if value is None and old.device.type == "meta" and target.type != "meta":
        raise ValueError(
            f"{tensor_name!r} is on the meta device, so it has no data to move to {target}; pass "
            f"`value=` with its weights (for instance from the checkpoint)."
        )
    cast_to = resolve_dtype(dtype)
    if value is not None:
        if tuple(old.shape) != tuple(value.shape):
            raise ValueError(
                f"The value for {tensor_name!r} must have the model's shape {tuple(old.shape)}; "
                f"got {tuple(value.shape)}. Check that the checkpoint matches the model config."
            )
        if cast_to is None:
            if value.dtype != old.dtype and (value.is_floating_point() or old.is_floating_point()):
                value = value.to(old.dtype)
        elif value.is_floating_point():
            value = value.to(cast_to)
    with torch.no_grad():
        if value is None:
            new_value = old.to(target, non_blocking=non_blocking)
            if cast_to is not None and target.type == "meta" and old.is_floating_point():
                new_value = new_value.to(cast_to)
        else:
            new_value = value.to(target, non_blocking=non_blocking)
        if is_buffer:
            owner._buffers[name] = new_value
            return
        param_cls = cast("type[nn.Parameter]", type(old))
        extra = dict(old.__dict__)
        if param_cls is nn.Parameter:
            new_param = nn.Parameter(new_value, requires_grad=old.requires_grad)
            new_param.__dict__.update(extra)
        else:
            try:
                new_param = param_cls(new_value, requires_grad=old.requires_grad, **extra)
            except TypeError:
                new_param = param_cls(new_value, requires_grad=old.requires_grad)
        if fp16_statistics is not None:
            new_param.SCB = fp16_statistics.to(target)  # type: ignore[attr-defined]
        owner._parameters[name] = new_param
    if tied_params_map is not None and value is not None and not is_buffer:
        if value.device.type != "meta" and value.data_ptr() in tied_params_map:
            tied_params_map[value.data_ptr()][target] = new_param


def find_tied_parameters(model: nn.Module, **kwargs: Any) -> list[list[str]]:
    """Finds the groups of parameter names that share one parameter object (tied weights).

    Args:
        model: The model to inspect (meta tensors are fine).

    Returns:
        A sorted list of sorted name groups, e.g. ``[["lm_head.weight", "embed.weight"]]``.

    Example:
        >>> model = nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))
        >>> model[1].weight = model[0].weight
        >>> find_tied_parameters(model)
        [['0.weight', '1.weight']]
    """
    from ._sizes import walk_modules

    by_id: dict[int, list[str]] = {}
    for module_name, module in walk_modules(model, remove_duplicate=False):
        prefix = f"{module_name}." if module_name else ""
        for key, param in module._parameters.items():
            if param is not None:
                by_id.setdefault(id(param), []).append(prefix + key)
    groups = [sorted(set(names)) for names in by_id.values() if len(set(names)) > 1]
    return sorted(groups)


def retie_parameters(model: nn.Module, tied_params: list[list[str]]) -> None:
    """Makes every name of each group point to the same parameter again.

    Replacing a parameter (loading, hooks) breaks a tie; this restores it, keeping the first
    name's parameter that is not on the meta device (or the first one).

    Args:
        model: The model to fix.
        tied_params: Groups as returned by [`find_tied_parameters`][accel_bigmodel.find_tied_parameters].
    """
    for group in tied_params:
        params = []
        for name in group:
            owner, leaf = get_submodule_and_name(model, name)
            params.append((owner, leaf, owner._parameters.get(leaf)))
        keep = next((p for _, _, p in params if p is not None and p.device.type != "meta"), None)
        if keep is None:
            keep = params[0][2]
        for owner, leaf, _ in params:
            owner._parameters[leaf] = keep


def send_to_device(
    obj: Any, device: Device, non_blocking: bool = False, skip_keys: Any = None
) -> Any:
    """Moves every tensor nested in lists, tuples, dicts and ``.to``-able objects to ``device``."""
    if isinstance(skip_keys, str):
        skip_keys = [skip_keys]
    skip = set(skip_keys or ())
    target = normalize_device(device)

    def move(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            if value.device == target:
                return value
            return value.to(target, non_blocking=non_blocking)
        if isinstance(value, tuple) and hasattr(value, "_fields"):
            return type(value)(*(move(v) for v in value))
        if isinstance(value, (list, tuple)):
            return type(value)(move(v) for v in value)
        if isinstance(value, Mapping):
            if type(value) is dict:
                return {k: (v if k in skip else move(v)) for k, v in value.items()}
            if isinstance(value, MutableMapping):
                # Mapping subclasses (model outputs) may not be rebuildable from a dict.
                for k in list(value.keys()):
                    if k not in skip:
                        value[k] = move(value[k])
                return value
            return {k: (v if k in skip else move(v)) for k, v in value.items()}
        to = getattr(value, "to", None)
        if callable(to) and not isinstance(value, (type, nn.Module)):
            try:
                return to(target)
            except TypeError:
                return value
        return value

    return move(obj)


def id_tensor_storage(tensor: torch.Tensor) -> tuple[torch.device, int, int]:
    """An identifier of the memory behind ``tensor``: ``(device, storage address, bytes)``.

    Two tensors with the same identifier share their storage (tied or viewed weights). A meta
    tensor has no memory: its address is 0 and its size is what it would take.
    """
    if tensor.device.type == "meta":
        return tensor.device, 0, tensor.nelement() * tensor.element_size()
    storage = tensor.untyped_storage()
    return tensor.device, storage.data_ptr(), storage.nbytes()


def check_device_same(first_device: torch.device, second_device: torch.device) -> bool:
    """Whether two devices are the same, reading an accelerator without an index as index 0
    (``cuda`` and ``cuda:0`` are the same device)."""
    if first_device.type != second_device.type:
        return False

    def indexed(device: torch.device) -> torch.device:
        if device.type != "cpu" and device.index is None:
            return torch.device(device.type, 0)
        return device

    return indexed(first_device) == indexed(second_device)

"""Using a device map: checking one against the model and this machine, the device a module
is mapped to, the offload folder a map with ``"disk"`` needs, and turning a strategy name
(``"auto"``, ``"balanced"`` ...) or one device into a map."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Union

import torch
from torch import nn

from ._device_map import DEVICE_MAP_STRATEGIES, infer_auto_device_map
from ._devices import DeviceMapError, check_device
from ._memory_budget import get_balanced_memory

_MAP_FIX = "Use 'cpu', 'disk' (with an offload folder), a GPU listed here, or device_map='auto'."


def check_device_map(
    model: nn.Module, device_map: Mapping[str, Any], *, check_devices: bool = False
) -> None:
    """Checks a device map against the model (and, on request, this machine).

    Every parameter and buffer must be covered; a key that names no submodule or tensor of
    ``model`` is named in the error when something is left uncovered, and in a ``UserWarning``
    otherwise (it places nothing, as in the reference). A map may be planned for another machine, so its devices are checked only
    with ``check_devices=True`` (``dispatch_model`` and ``load_checkpoint_in_model``, which
    move weights, do so): each value must then be a device that exists here (``"cpu"``,
    ``"disk"``, ``"meta"``, GPU indices or names this machine has).

    Args:
        model: The model the map is for.
        device_map: Module or tensor name -> device.
        check_devices: Also check the devices against this machine.

    Raises:
        DeviceMapError: Naming the bad entries, the devices that exist, and the fix.
    """
    check_map_devices(device_map, check_devices=check_devices)
    modules = dict(model.named_modules())
    tensor_names = list(model.state_dict().keys())
    known = set(modules) | set(tensor_names)
    for name, _ in model.named_parameters(remove_duplicate=False):
        known.add(name)
    unknown = [k for k in device_map if k not in known]
    unknown_text = ""
    if unknown:
        sample = ", ".join(sorted(name for name in modules if name)[:8])
        unknown_text = (
            f"device_map keys do not match any submodules or tensors of the model: {unknown} "
            f"(some modules are: {sample})"
        )
    uncovered = (
        []
        if "" in device_map
        else [t for t in tensor_names if mapped_device(device_map, t) is None]
    )
    if uncovered:
        shown = ", ".join(uncovered[:10]) + (" ..." if len(uncovered) > 10 else "")
        also = f" Also, {unknown_text}: fix their names." if unknown else ""
        raise DeviceMapError(
            f"A device_map must give a device to every parameter and buffer; {len(uncovered)} have "
            f"none: {shown}.{also} Add their modules to the device_map, or use device_map='auto'."
        )
    if unknown:
        # Every tensor has a device, so the map is usable: the extra keys place nothing.
        warnings.warn(
            f"{unknown_text}; they place nothing, as every "
            "parameter and buffer has a device from the other keys. Fix or remove those keys.",
            UserWarning,
            stacklevel=2,
        )


def check_map_devices(device_map: Any, *, check_devices: bool = True) -> None:
    """Checks that ``device_map`` is a mapping and (with ``check_devices``) that each of its
    devices exists here: the part of [`check_device_map`][accel_bigmodel.check_device_map] that does not read the model.

    Raises:
        DeviceMapError: Naming the bad entry, the devices that exist, and the fix.
    """
    if not isinstance(device_map, Mapping):
        raise DeviceMapError(
            f"device_map must be a dict of module name -> device; got "
            f"{type(device_map).__name__} {device_map!r}. {_MAP_FIX}"
        )
    for key, value in device_map.items() if check_devices else ():
        check_device(value, f"device_map[{key!r}]", _MAP_FIX)


def require_offload_folder(device_map: Mapping[str, Any], folder: Any, argument: str) -> None:
    """Raises [`DeviceMapError`][accel_bigmodel.DeviceMapError] when ``device_map`` sends modules to ``"disk"`` but the
    folder argument ``argument`` (``offload_folder`` / ``offload_dir``) is ``None``."""
    if folder is not None:
        return
    disk = [k for k, v in device_map.items() if isinstance(v, str) and v == "disk"]
    if disk:
        shown = disk[:5] + (["..."] if len(disk) > 5 else [])
        raise DeviceMapError(
            f"Modules mapped to 'disk' need an offload folder; device_map sends {shown} to disk "
            f"but {argument} is None. Pass {argument}='some/folder', or raise max_memory so "
            "nothing goes to disk."
        )


def mapped_device(device_map: Mapping[str, Any], name: str) -> Any:
    """Device of ``name`` under the longest matching ``device_map`` key, or ``None``."""
    node = name
    while True:
        if node in device_map:
            return device_map[node]
        if not node:
            return None
        node = node.rsplit(".", 1)[0] if "." in node else ""


def resolve_device_map(
    model: nn.Module,
    device_map: Any,
    max_memory: Mapping[Any, Any] | None,
    no_split_module_classes: list[str] | None,
    dtype: Union[str, torch.dtype, None],
    offload_buffers: bool = False,
) -> dict[str, Any] | None:
    """Expands ``"auto"``/``"balanced"``/``"balanced_low_0"``/``"sequential"`` or a single
    device into a device map, and checks it (see [`check_device_map`][accel_bigmodel.check_device_map]).

    Raises:
        DeviceMapError: On a device map or ``max_memory`` entry that cannot be used here.
    """
    if device_map is None:
        return None
    if isinstance(device_map, str) and device_map in DEVICE_MAP_STRATEGIES:
        if device_map != "sequential":
            max_memory = get_balanced_memory(
                model,
                max_memory=max_memory,
                no_split_module_classes=no_split_module_classes,
                dtype=dtype,
                low_zero=device_map == "balanced_low_0",
                check_devices=True,
            )
        return infer_auto_device_map(
            model,
            max_memory=max_memory,
            no_split_module_classes=no_split_module_classes,
            dtype=dtype,
            offload_buffers=offload_buffers,
            check_devices=True,
        )
    if isinstance(device_map, (str, torch.device, int)):
        check_device(
            device_map,
            "device_map",
            f"Use one of {DEVICE_MAP_STRATEGIES}, a device of this machine, or a dict like "
            "{'': 'cpu'}.",
        )
        device_map = {"": device_map}
    check_device_map(model, device_map, check_devices=True)
    return dict(device_map)

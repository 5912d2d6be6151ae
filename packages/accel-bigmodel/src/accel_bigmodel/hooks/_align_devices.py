"""Placing a module's inputs and weights on the execution device just in time for ``forward``:
[`AlignDevicesHook`][accel_bigmodel.AlignDevicesHook] and the functions that attach it to a model's modules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Union, cast

import torch
from torch import nn

from ..offload._offload import PrefixedDataset
from ..placement._sizes import get_non_persistent_buffers, named_module_tensors
from ..placement._tensors import (
    Device,
    get_submodule_and_name,
    send_to_device,
    set_module_tensor_to_device,
)
from ._hooks import ModelHook, add_hook_to_module
from ._prefetch import Prefetcher


def _first_device(data: Any) -> torch.device | None:
    if isinstance(data, torch.Tensor):
        return data.device
    if isinstance(data, Mapping):
        data = list(data.values())
    if isinstance(data, (list, tuple)):
        for item in data:
            found = _first_device(item)
            if found is not None:
                return found
    return None


class AlignDevicesHook(ModelHook):
    """Puts a module's inputs (and, when offloaded, its weights) on the execution device.

    With ``offload=True`` the weights live in ``weights_map`` and the module holds meta tensors
    except during its ``forward``. When a prefetcher is attached (``dispatch_model`` does it),
    the weights of the next offloaded module are prepared in a background thread while this one
    computes.

    Args:
        execution_device: Device the forward runs on.
        offload: Keep the weights in ``weights_map`` between calls.
        io_same_device: Return outputs on the device the inputs came from.
        weights_map: Name -> tensor of the offloaded weights (relative to the module).
        offload_buffers: Offload buffers too.
        place_submodules: Manage the tensors of submodules too.
        skip_keys: Keyword arguments (or output keys) never moved.
        tied_params_map: ``data_ptr -> {device: tensor}`` so tied weights are placed once.
    """

    def __init__(
        self,
        execution_device: Device | None = None,
        offload: bool = False,
        io_same_device: bool = False,
        weights_map: Mapping[str, torch.Tensor] | None = None,
        offload_buffers: bool = False,
        place_submodules: bool = False,
        skip_keys: Union[str, list[str], None] = None,
        tied_params_map: dict[int, dict[Any, torch.Tensor]] | None = None,
    ) -> None:
        self.execution_device = execution_device
        self.offload = offload
        self.io_same_device = io_same_device
        self.weights_map = weights_map
        self.offload_buffers = offload_buffers
        self.place_submodules = place_submodules
        self.skip_keys = skip_keys
        self.input_device: torch.device | None = None
        self.param_original_devices: dict[str, torch.device] = {}
        self.buffer_original_devices: dict[str, torch.device] = {}
        self.tied_params_names: set[str] = set()
        self.tied_params_map = tied_params_map
        self.tied_pointers_to_remove: set[tuple[int, Any]] = set()
        self.offloaded_names: list[str] = []
        self.prefetcher: Prefetcher | None = None

    def __repr__(self) -> str:
        return (
            f"AlignDevicesHook(execution_device={self.execution_device}, offload={self.offload}, "
            f"io_same_device={self.io_same_device}, offload_buffers={self.offload_buffers}, "
            f"place_submodules={self.place_submodules}, skip_keys={self.skip_keys!r})"
        )

    def _target(self) -> torch.device | None:
        if self.execution_device is None:
            return None
        from ..placement._tensors import normalize_device

        return normalize_device(self.execution_device)

    def init_hook(self, module: nn.Module) -> nn.Module:
        target = self._target()
        if target is not None and target.type == "meta":
            self.tied_params_map = None
        if not self.offload and target is not None:
            for name, tensor in named_module_tensors(module, recurse=self.place_submodules):
                if tensor.device.type == "meta" and target.type != "meta":
                    # Weights of an offloaded submodule: its own hook brings them in.
                    continue
                set_module_tensor_to_device(
                    module, name, target, tied_params_map=self.tied_params_map
                )
            return module
        if not self.offload:
            return module
        self.param_original_devices = {
            name: p.device for name, p in module.named_parameters(recurse=self.place_submodules)
        }
        self.buffer_original_devices = {
            name: b.device for name, b in module.named_buffers(recurse=self.place_submodules)
        }
        if self.weights_map is None:
            self.weights_map = {
                name: t.detach().to("cpu")
                for name, t in named_module_tensors(
                    module, include_buffers=self.offload_buffers, recurse=self.place_submodules
                )
            }
        self.offloaded_names = [
            name
            for name, _ in named_module_tensors(
                module,
                include_buffers=self.offload_buffers,
                recurse=self.place_submodules,
                remove_non_persistent=True,
            )
        ]
        for name in self.offloaded_names:
            owner, leaf = get_submodule_and_name(module, name)
            current = getattr(owner, leaf)
            if (
                self.tied_params_map is not None
                and current.device.type != "meta"
                and current.data_ptr() in self.tied_params_map
            ):
                self.tied_params_names.add(name)
            set_module_tensor_to_device(module, name, "meta")
        if target is not None:
            if not self.offload_buffers:
                names = [n for n, _ in module.named_buffers(recurse=self.place_submodules)]
            else:
                names = sorted(
                    get_non_persistent_buffers(module, recurse=self.place_submodules, fqns=True)
                )
            for name in names:
                owner, leaf = get_submodule_and_name(module, name)
                buffer = owner._buffers[leaf]
                if buffer is not None and buffer.device.type != "meta":
                    set_module_tensor_to_device(
                        module, name, target, tied_params_map=self.tied_params_map
                    )
        return module

    def fetch_weights(self) -> dict[str, torch.Tensor]:
        """Returns the offloaded weights, ready on the execution device (thread-safe)."""
        assert self.weights_map is not None
        target = self._target() or torch.device("cpu")
        values: dict[str, torch.Tensor] = {}
        for name in self.offloaded_names:
            tensor = self.weights_map[name]
            if tensor.device != target:
                tensor = tensor.to(target, non_blocking=True)
            values[name] = tensor
        return values

    def pre_forward(self, module: nn.Module, *args: Any, **kwargs: Any) -> tuple[tuple, dict]:
        if self.io_same_device:
            self.input_device = _first_device([args, kwargs])
        target = self._target()
        if self.offload and target is not None:
            values = None
            if self.prefetcher is not None:
                values = self.prefetcher.take(self)
            if values is None:
                values = self.fetch_weights()
            self.tied_pointers_to_remove = set()
            for name, value in values.items():
                if (
                    self.tied_params_map is not None
                    and value.data_ptr() in self.tied_params_map
                    and target not in self.tied_params_map[value.data_ptr()]
                ):
                    self.tied_pointers_to_remove.add((value.data_ptr(), target))
                set_module_tensor_to_device(
                    module, name, target, value=value, tied_params_map=self.tied_params_map
                )
            if self.prefetcher is not None:
                self.prefetcher.schedule_after(self)
        if target is None:
            return args, kwargs
        return (
            send_to_device(args, target),
            send_to_device(kwargs, target, skip_keys=self.skip_keys),
        )

    def post_forward(self, module: nn.Module, output: Any) -> Any:
        if self.offload:
            for name in self.offloaded_names:
                set_module_tensor_to_device(module, name, "meta")
            if self.tied_params_map is not None:
                for pointer, device in self.tied_pointers_to_remove:
                    self.tied_params_map.get(pointer, {}).pop(device, None)
            self.tied_pointers_to_remove = set()
            if self.prefetcher is not None:
                self.prefetcher.release(self)
        if self.io_same_device and self.input_device is not None:
            output = send_to_device(output, self.input_device, skip_keys=self.skip_keys)
        return output

    def detach_hook(self, module: nn.Module) -> nn.Module:
        self.prefetcher = None
        if self.offload and self.weights_map is not None:
            originals = {**self.param_original_devices, **self.buffer_original_devices}
            for name, device in originals.items():
                if device.type == "meta" or name not in self.weights_map:
                    continue
                set_module_tensor_to_device(module, name, device, value=self.weights_map[name])
        return module


def attach_execution_device_hook(
    module: nn.Module,
    execution_device: Device | None,
    skip_keys: Union[str, list[str], None] = None,
    preload_module_classes: list[str] | None = None,
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None = None,
) -> None:
    """Adds an input-moving [`AlignDevicesHook`][accel_bigmodel.AlignDevicesHook] to every submodule that holds tensors.

    Args:
        module: The module to walk.
        execution_device: Device inputs are moved to (``None``: inputs stay where they are).
        skip_keys: Keyword arguments never moved.
        preload_module_classes: Classes whose submodules are not hooked separately.
        tied_params_map: Shared map of tied weights already placed.
    """
    if not hasattr(module, "_hf_hook") and len(module.state_dict()) > 0:
        add_hook_to_module(
            module,
            AlignDevicesHook(
                execution_device, skip_keys=skip_keys, tied_params_map=tied_params_map
            ),
        )
    if preload_module_classes is not None and type(module).__name__ in preload_module_classes:
        return
    for child in module.children():
        attach_execution_device_hook(
            child, execution_device, skip_keys, preload_module_classes, tied_params_map
        )


def attach_align_device_hook(
    module: nn.Module,
    execution_device: Device | None = None,
    offload: bool = False,
    weights_map: Mapping[str, torch.Tensor] | None = None,
    offload_buffers: bool = False,
    module_name: str = "",
    skip_keys: Union[str, list[str], None] = None,
    preload_module_classes: list[str] | None = None,
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None = None,
) -> None:
    """Hooks every submodule that directly holds tensors so it runs on ``execution_device``.

    Args:
        module: The module to walk.
        execution_device: Device the forwards run on.
        offload: Keep weights in ``weights_map`` between calls.
        weights_map: Name -> tensor for the whole ``module`` (keys prefixed by ``module_name``).
        offload_buffers: Offload buffers too.
        module_name: Name of ``module`` inside the model (prefix of ``weights_map`` keys).
        skip_keys: Keyword arguments never moved.
        preload_module_classes: Classes that load all their submodules' weights at once.
        tied_params_map: Shared map of tied weights already placed.
    """
    directs = list(named_module_tensors(module))
    full = (
        offload
        and preload_module_classes is not None
        and type(module).__name__ in preload_module_classes
    )
    prefix = f"{module_name}." if module_name else ""
    if directs or full:
        prefixed = None if weights_map is None else PrefixedDataset(weights_map, prefix)
        hook = AlignDevicesHook(
            execution_device=execution_device,
            offload=offload,
            weights_map=prefixed,
            offload_buffers=offload_buffers,
            place_submodules=full,
            skip_keys=skip_keys,
            tied_params_map=tied_params_map,
        )
        add_hook_to_module(module, hook, append=True)
    if full:
        return
    for child_name, child in module.named_children():
        attach_align_device_hook(
            child,
            execution_device=execution_device,
            offload=offload,
            weights_map=weights_map,
            offload_buffers=offload_buffers,
            module_name=prefix + child_name,
            skip_keys=skip_keys,
            preload_module_classes=preload_module_classes,
            tied_params_map=tied_params_map,
        )


def attach_align_device_hook_on_blocks(
    module: nn.Module,
    execution_device: Union[Device, Mapping[str, Union[Device, None]], None] = None,
    offload: Union[bool, Mapping[str, bool]] = False,
    weights_map: Mapping[str, torch.Tensor] | None = None,
    offload_buffers: bool = False,
    module_name: str = "",
    skip_keys: Union[str, list[str], None] = None,
    preload_module_classes: list[str] | None = None,
    tied_params_map: dict[int, dict[Any, torch.Tensor]] | None = None,
) -> None:
    """Hooks the blocks of a device map: each block runs on its execution device.

    Args:
        module: The model (or a submodule when recursing).
        execution_device: One device, or block name -> device.
        offload: One flag, or block name -> whether its weights are offloaded.
        weights_map: Name -> tensor of every offloaded weight (model-level names).
        offload_buffers: Offload buffers too.
        module_name: Name of ``module`` inside the model.
        skip_keys: Keyword arguments never moved.
        preload_module_classes: Classes that load all their submodules' weights at once.
        tied_params_map: Shared map of tied weights already placed.
    """
    if not isinstance(execution_device, Mapping) and not isinstance(offload, Mapping):
        if not offload:
            hook = AlignDevicesHook(
                execution_device=execution_device,
                io_same_device=True,
                skip_keys=skip_keys,
                place_submodules=True,
                tied_params_map=tied_params_map,
            )
            add_hook_to_module(module, hook)
        else:
            attach_align_device_hook(
                module,
                execution_device=execution_device,
                offload=True,
                weights_map=weights_map,
                offload_buffers=offload_buffers,
                module_name=module_name,
                skip_keys=skip_keys,
                tied_params_map=tied_params_map,
            )
        return
    # One of the two is a map (module name -> value): spread the other over its keys.
    devices: Mapping[str, Device | None]
    offloads: Mapping[str, bool]
    if isinstance(execution_device, Mapping):
        devices = execution_device
        offloads = offload if isinstance(offload, Mapping) else dict.fromkeys(devices, offload)
    else:
        offloads = cast("Mapping[str, bool]", offload)  # a map: the case of none returned above
        devices = dict.fromkeys(offloads, execution_device)
    if module_name in devices and module_name in offloads and not offloads[module_name]:
        hook = AlignDevicesHook(
            execution_device=devices[module_name],
            offload_buffers=offload_buffers,
            io_same_device=module_name == "",
            place_submodules=True,
            skip_keys=skip_keys,
            tied_params_map=tied_params_map,
        )
        add_hook_to_module(module, hook)
        attach_execution_device_hook(
            module,
            devices[module_name],
            skip_keys=skip_keys,
            tied_params_map=tied_params_map,
        )
    elif module_name in devices and module_name in offloads:
        attach_align_device_hook(
            module,
            execution_device=devices[module_name],
            offload=True,
            weights_map=weights_map,
            offload_buffers=offload_buffers,
            module_name=module_name,
            skip_keys=skip_keys,
            preload_module_classes=preload_module_classes,
            tied_params_map=tied_params_map,
        )
        if not hasattr(module, "_hf_hook"):
            hook = AlignDevicesHook(
                execution_device=devices[module_name],
                io_same_device=module_name == "",
                skip_keys=skip_keys,
                tied_params_map=tied_params_map,
            )
            add_hook_to_module(module, hook)
        attach_execution_device_hook(
            module,
            devices[module_name],
            preload_module_classes=preload_module_classes,
            skip_keys=skip_keys,
            tied_params_map=tied_params_map,
        )
    elif module_name == "":
        hook = AlignDevicesHook(
            execution_device=devices.get(""),
            io_same_device=True,
            skip_keys=skip_keys,
            tied_params_map=tied_params_map,
        )
        add_hook_to_module(module, hook)
    for child_name, child in module.named_children():
        child_name = f"{module_name}.{child_name}" if module_name else child_name
        attach_align_device_hook_on_blocks(
            child,
            execution_device=devices,
            offload=offloads,
            weights_map=weights_map,
            offload_buffers=offload_buffers,
            module_name=child_name,
            preload_module_classes=preload_module_classes,
            skip_keys=skip_keys,
            tied_params_map=tied_params_map,
        )

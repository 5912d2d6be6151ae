"""Placing a model's submodules on devices under memory budgets, in time linear in its size."""

from __future__ import annotations

import logging
import warnings
from collections import deque
from collections.abc import Mapping
from typing import Any, Union

import torch
from torch import nn

from ._budget_numbers import UNLIMITED, planned_bytes
from ._devices import DeviceMapError
from ._layer_reserve import plan_reserving_largest_layer
from ._memory_budget import DeviceKey, get_max_memory, no_split_names
from ._sizes import (
    ModuleScan,
    compute_module_sizes,
    compute_module_total_buffer_size,
    gc_paused,
    scan_modules,
)

logger = logging.getLogger("accel_bigmodel.modeling")

DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")

_RESERVES = ("largest_layer", "offloaded_layers")


def _layer_sizes(scan: ModuleScan, no_split: set[str]) -> dict[str, int]:
    """Largest block executed at once inside each splittable module (one pass, bottom-up).

    A leaf or an unsplittable module runs whole, so its layer size is its size and it gets no
    entry; a splittable module counts its largest child or the total of its own direct tensors
    (loaded together by its own hook).
    """
    unsplittable = {kind: kind.__name__ in no_split for kind in set(scan.kinds)}
    largest_child = [0] * len(scan.modules)
    result: dict[str, int] = {}
    for index in range(len(scan.modules) - 1, -1, -1):
        if unsplittable[scan.kinds[index]] or not scan.has_children[index]:
            layer = scan.totals[index]
        else:
            layer = max(scan.own[index], largest_child[index])
            result[scan.modules[index][0]] = layer
        parent = scan.parents[index]
        if parent >= 0 and layer > largest_child[parent]:
            largest_child[parent] = layer
    return result


def _units_of(name: str, module: nn.Module) -> list[tuple[str, Any]]:
    prefix = f"{name}." if name else ""
    units: list[tuple[str, Any]] = []
    for n, p in module._parameters.items():
        if p is not None:
            units.append((prefix + n, p))
    for n, m in module._modules.items():
        if m is not None:
            units.append((prefix + n, m))
    for n, b in module._buffers.items():
        if b is not None:
            units.append((prefix + n, b))
    return units


def _inside(name: str, container: str) -> bool:
    return container == "" or name == container or name.startswith(container + ".")


class _Placer:
    """One greedy pass: devices in order, split a unit only when it does not fit."""

    def __init__(
        self,
        model: nn.Module,
        budget: dict[DeviceKey, int],
        sizes: Mapping[str, int],
        layer_sizes: Mapping[str, int],
        no_split: set[str],
        tied_groups: list[list[str]],
        verbose: bool,
        fallback: bool = False,
    ) -> None:
        self.model = model
        self.fallback = fallback
        self.budget = budget
        self.devices = list(budget)
        self.sizes = sizes
        self.layer_sizes = layer_sizes
        self.no_split = no_split
        self.verbose = verbose
        self.tied_params = [(p, group) for group in tied_groups for p in group]

    def _say(self, message: str) -> None:
        if self.verbose:
            print(message)

    def _splittable(self, obj: Any) -> bool:
        return (
            isinstance(obj, nn.Module)
            and bool(obj._modules)
            and type(obj).__name__ not in self.no_split
        )

    def _fallback_unit(
        self, queue: deque[tuple[str, Any]], room: int, assigned: Mapping[str, Any]
    ) -> bool:
        """Find, breadth first among the units still queued and their parts, the first one
        that fits in ``room``; move it to the front of ``queue`` (splitting its ancestors).

        Returns:
            Whether such a unit was found.
        """
        search: deque[tuple[str, Any, tuple[str, ...]]] = deque(
            (name, obj, ()) for name, obj in queue if name not in assigned
        )
        while search:
            name, obj, ancestors = search.popleft()
            partners = self._tied_partners(name, assigned) if self.tied_params else []
            total = self.sizes.get(name, 0) + sum(self.sizes.get(p, 0) for p in partners)
            if 0 < total <= room:
                self._say(f"Fallback: {name} (size {total}) fits in the {room} bytes left.")
                self._bring_to_front(queue, name, ancestors)
                return True
            if self._splittable(obj):
                search.extend((n, o, (*ancestors, name)) for n, o in _units_of(name, obj))
        return False

    @staticmethod
    def _bring_to_front(
        queue: deque[tuple[str, Any]], name: str, ancestors: tuple[str, ...]
    ) -> None:
        items = list(queue)
        for ancestor in ancestors:  # replace each ancestor by its parts, in place
            at = next(i for i, (n, _) in enumerate(items) if n == ancestor)
            items[at : at + 1] = _units_of(ancestor, items[at][1])
        at = next(i for i, (n, _) in enumerate(items) if n == name)
        found = items.pop(at)
        queue.clear()
        queue.extend([found, *items])

    def _owner(self, param_name: str) -> str:
        return param_name.rsplit(".", 1)[0] if "." in param_name else param_name

    def _tied_partners(self, name: str, assigned: Mapping[str, Any]) -> list[str]:
        partners: list[str] = []
        for param, group in self.tied_params:
            if not _inside(param, name):
                continue
            for other in group:
                if _inside(other, name):
                    continue
                owner = self._owner(other)
                if owner in assigned or _inside(name, owner) or owner in partners:
                    continue
                partners.append(owner)
        return partners

    def place(
        self, reserve: Mapping[DeviceKey, int]
    ) -> tuple[dict[str, DeviceKey], dict[DeviceKey, int]]:
        """Returns ``(device_map, size of the largest layer placed on each device)``."""
        queue: deque[tuple[str, Any]] = deque(_units_of("", self.model))
        device_map: dict[str, DeviceKey] = {}
        used = dict.fromkeys(self.devices, 0)
        largest = dict.fromkeys(self.devices, 0)
        index = 0
        while queue:
            name, obj = queue.popleft()
            if name in device_map:
                continue
            device = self.devices[index]
            size = self.sizes.get(name, 0)
            partners = self._tied_partners(name, device_map) if self.tied_params else []
            total = size + sum(self.sizes.get(p, 0) for p in partners)
            if device == "disk":
                capacity = None
            else:
                capacity = self.budget[device] - reserve.get(device, 0)
            if capacity is None or used[device] + total <= capacity:
                used[device] += total
                device_map[name] = device
                for unit in (name, *partners):
                    device_map[unit] = device
                    layer = self.layer_sizes.get(unit, self.sizes.get(unit, 0))
                    largest[device] = max(largest[device], layer)
                if self.verbose:
                    self._say(
                        f"Putting {name}{' and ' + ', '.join(partners) if partners else ''} "
                        f"(size={total}) on {device}"
                        + (
                            ""
                            if capacity is None
                            else f" (available={capacity - used[device] + total})"
                        )
                        + "."
                    )
                continue
            if self._splittable(obj):
                self._say(f"Not enough space on {device} for {name} (size {total}); splitting it.")
                queue.extendleft(reversed(_units_of(name, obj)))
                continue
            if index + 1 >= len(self.devices):
                raise ValueError(
                    f"Every module must fit on a device of max_memory; {name!r} needs {total} bytes "
                    f"but the last device {device!r} has {max(capacity or 0, 0) - used[device]} "
                    f"bytes left (max_memory={dict(self.budget)}). Raise max_memory, add 'disk' "
                    f"to it (with an offload folder), or list fewer no_split_module_classes."
                )
            self._say(f"{name} (size {total}) cannot be split and does not fit on {device}.")
            if self.fallback and used[device] == 0 and capacity is not None:
                queue.appendleft((name, obj))
                if self._fallback_unit(queue, capacity, device_map):
                    continue
                queue.popleft()
            index += 1
            queue.appendleft((name, obj))
        return device_map, largest


def _required_reserve(
    devices: list[DeviceKey], largest: Mapping[DeviceKey, int], main: DeviceKey
) -> dict[DeviceKey, int]:
    need: dict[DeviceKey, int] = {}
    if main != "cpu":
        offloaded = max(largest.get("cpu", 0), largest.get("disk", 0))
        if offloaded:
            need[main] = offloaded
    if "cpu" in devices and largest.get("disk", 0):
        need["cpu"] = max(need.get("cpu", 0), largest["disk"])
    return need


def infer_auto_device_map(
    model: nn.Module,
    max_memory: Mapping[Any, Any] | None = None,
    no_split_module_classes: list[str] | None = None,
    dtype: Union[str, torch.dtype, None] = None,
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None = None,
    verbose: bool = False,
    clean_result: bool = True,
    offload_buffers: bool = False,
    fallback_allocation: bool = False,
    *,
    check_devices: bool = False,
    offload_to_disk: bool = True,
    reserve: str = "largest_layer",
) -> dict[str, DeviceKey]:
    """Computes a device map giving priority to GPUs, then the CPU, then the disk.

    The placement guarantees that:

    - no device receives more than its budget;
    - if weights are offloaded to the CPU or disk, the main device keeps room for the largest
      offloaded layer (it executes there), and if weights go to disk the CPU keeps room for the
      largest layer on disk;
    - tied parameters land on the same device.

    By default (``reserve="largest_layer"``) the main devices (the first GPU and the CPU, or
    ``"mps"``, or the CPU alone) keep free the size of the largest layer not placed yet while
    they are filled, as the reference library does, so the same inputs give the same map.
    ``reserve="offloaded_layers"`` keeps only the room that the layers actually offloaded need:
    a model that fits on the GPUs is not offloaded for a reservation it does not use, and an
    unbalanced model (one large layer, many small ones) keeps more on the GPUs. The run time
    is linear in the number of modules either way.

    Args:
        model: The model to place (may be on the meta device).
        max_memory: Device -> budget as ``get_max_memory`` reads it (bytes as any number or a
            string like ``"10GiB"``; ``None``: no limit); measured when ``None``.
        no_split_module_classes: Class names never split across devices (residual blocks).
        dtype: Count floating-point weights as this dtype.
        special_dtypes: Per-tensor dtype overrides.
        verbose: Print each placement decision.
        clean_result: Merge submodules that share a device into their parent's entry.
        offload_buffers: Whether the buffers of layers offloaded to the CPU or disk are
            offloaded too. When False (buffers then stay on the execution device) and those
            buffers do not fit in any GPU's remaining budget, a ``UserWarning`` says so.
        fallback_allocation: When a device would stay empty because the next module neither
            fits nor can be split, place there the first later module (searched breadth
            first, submodules included) that fits, instead of leaving the device unused.
        check_devices: Refuse ``max_memory`` devices this machine does not have. By default a
            map is planned for any machine (one with those GPUs); the functions that move
            weights check the devices.
        offload_to_disk: When the devices of ``max_memory`` cannot hold the whole model, map
            the rest to ``"disk"``, and leave out a device too small to run the largest
            offloaded layer (as the reference library does; loading then needs an offload
            folder). ``False`` refuses such a model, or such a device, with a ``ValueError``.
        reserve: ``"largest_layer"`` (default) or ``"offloaded_layers"``: what the main
            devices keep free while they are filled (see above).

    Returns:
        An ordered ``{module_name: device}`` dict covering every parameter and buffer.

    Raises:
        DeviceMapError: On a bad ``max_memory`` entry (unknown or absent device, bad size).
        ValueError: When the model cannot fit, or a device that must execute offloaded layers
            cannot hold the largest of them.
    """
    if reserve not in _RESERVES:
        raise ValueError(
            f"reserve must be one of {_RESERVES}; got {reserve!r}. Pass 'largest_layer' (the "
            "default) or 'offloaded_layers'."
        )
    no_split = no_split_names(no_split_module_classes)
    budget = {
        device: planned_bytes(value)
        for device, value in get_max_memory(max_memory, check_devices=check_devices).items()
    }
    if not budget and not offload_to_disk:
        raise DeviceMapError(
            "max_memory must name at least one device; got an empty mapping. Pass e.g. "
            "max_memory={'cpu': '8GiB', 'disk': '100GiB'}."
        )
    if reserve == "largest_layer":
        with gc_paused():
            device_map = plan_reserving_largest_layer(
                model,
                budget,
                no_split,
                dtype,
                special_dtypes,
                verbose,
                offload_buffers=offload_buffers,
                fallback=fallback_allocation,
                to_disk=offload_to_disk,
            )
        return clean_device_map(device_map) if clean_result else device_map
    if offload_to_disk and "disk" not in budget:
        budget["disk"] = UNLIMITED  # only what the listed devices cannot hold goes there
    with gc_paused():
        device_map = _infer(
            model,
            budget,
            no_split,
            dtype,
            special_dtypes,
            verbose,
            clean_result=False,
            fallback=fallback_allocation,
            leave_out_small=offload_to_disk,
        )
    if not offload_buffers:
        _warn_offloaded_buffers(model, device_map, budget, dtype, special_dtypes)
    return clean_device_map(device_map) if clean_result else device_map


def _warn_offloaded_buffers(
    model: nn.Module,
    device_map: Mapping[str, DeviceKey],
    budget: Mapping[DeviceKey, int],
    dtype: Union[str, torch.dtype, None],
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None,
) -> None:
    """Warn when offloaded layers' buffers (kept on the execution device) fit in no GPU."""
    placed = set(device_map.values())
    gpus = [d for d in budget if d not in ("cpu", "disk") and d in placed]
    if not gpus:
        return  # no GPU executes (or a fallback left them out): buffers stay on the CPU
    sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    modules = dict(model.named_modules())
    buffers = dict(model.named_buffers())
    used = dict.fromkeys(budget, 0)
    offloaded = 0
    for name, device in device_map.items():
        used[device] = used.get(device, 0) + sizes.get(name, 0)
        if device not in ("cpu", "disk"):
            continue
        if name in modules:
            offloaded += compute_module_total_buffer_size(
                modules[name], dtype=dtype, special_dtypes=special_dtypes
            )
        elif name in buffers:
            offloaded += sizes.get(name, 0)
    if offloaded and not any(budget[g] >= used.get(g, 0) + offloaded for g in gpus):
        warnings.warn(
            f"Layers offloaded to the CPU or disk keep {offloaded} bytes of buffers on the "
            "execution device, which fit in no GPU's remaining max_memory; the model may run "
            "out of memory there. Pass offload_buffers=True to offload those buffers too.",
            UserWarning,
            stacklevel=3,
        )


def _infer(
    model: nn.Module,
    budget: dict[DeviceKey, int],
    no_split: set[str],
    dtype: Union[str, torch.dtype, None],
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None,
    verbose: bool,
    clean_result: bool,
    fallback: bool = False,
    leave_out_small: bool = False,
) -> dict[str, DeviceKey]:
    scan = scan_modules(model, dtype=dtype, special_dtypes=special_dtypes)
    sizes = scan.sizes
    layer_sizes = _layer_sizes(scan, no_split)
    tied_groups = sorted(sorted(names) for names in scan.shared.values())
    placer = _Placer(model, budget, sizes, layer_sizes, no_split, tied_groups, verbose, fallback)
    devices = list(budget)
    gpus = [d for d in devices if d not in ("cpu", "disk")]
    main = gpus[0] if gpus else "cpu"
    reserve: dict[DeviceKey, int] = {}
    device_map: dict[str, DeviceKey] = {}
    for _ in range(8):
        device_map, largest = placer.place(reserve)
        need = _required_reserve(devices, largest, main)
        if all(reserve.get(d, 0) >= v for d, v in need.items()):
            break
        reserve = {d: max(reserve.get(d, 0), need.get(d, 0)) for d in set(reserve) | set(need)}
    else:
        full = layer_sizes.get("", sizes.get("", 0))  # the root's layer is the largest
        reserve = {d: full for d in (main, "cpu") if d in budget}
        device_map, largest = placer.place(reserve)
        need = _required_reserve(devices, largest, main)
    for device, amount in need.items():
        if device in budget and amount > budget[device]:
            if (fallback or leave_out_small) and len(budget) > 1:
                # Leave out the device too small to run the offloaded layers (the reference
                # library does the same when the rest may go to disk).
                logger.info(
                    "%r cannot hold the largest offloaded layer (%d > %d bytes); placing the "
                    "model on the other devices.",
                    device,
                    amount,
                    budget[device],
                )
                rest = {d: v for d, v in budget.items() if d != device}
                return _infer(
                    model,
                    rest,
                    no_split,
                    dtype,
                    special_dtypes,
                    verbose,
                    clean_result,
                    fallback,
                    leave_out_small,
                )
            raise ValueError(
                f"The execution device must hold the largest offloaded layer; {device!r} has "
                f"max_memory {budget[device]} bytes but a layer of {amount} bytes is offloaded and "
                f"must run there. Raise max_memory[{device!r}] to at least {amount} bytes, or "
                f"split that layer (remove its class from no_split_module_classes)."
            )
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("device map reservations: %s", reserve)
    if clean_result:
        device_map = clean_device_map(device_map)
    return device_map


def clean_device_map(
    device_map: Mapping[str, DeviceKey], module_name: str = ""
) -> dict[str, DeviceKey]:
    """Merges entries so a module whose submodules all share one device gets a single entry.

    A module is merged when it covers more than one entry, all on one device; the highest
    such module wins. A lone entry stays at its own depth.

    Args:
        device_map: The map to clean (not modified).
        module_name: Only clean entries under this module.

    Returns:
        A new device map, in the order of the original entries.
    """
    prefix, depth = (f"{module_name}.", module_name.count(".") + 1) if module_name else ("", 0)
    mixed = object()
    # Per module at or under module_name: [entries strictly under it, their one device or mixed].
    stats: dict[str, list[Any]] = {}
    chains: dict[str, list[str]] = {}
    for key, value in device_map.items():
        if not key.startswith(prefix):
            continue
        parts = key.split(".")
        chain = [".".join(parts[:end]) for end in range(depth, len(parts))]
        chains[key] = chain
        for node in chain:
            seen = stats.get(node)
            if seen is None:
                stats[node] = [1, value]
            else:
                seen[0] += 1
                if seen[1] is not mixed and not seen[1] == value:
                    seen[1] = mixed
    result: dict[str, DeviceKey] = {}
    for key, value in device_map.items():
        chain = chains.get(key, [])
        top = next((n for n in chain if stats[n][0] > 1 and stats[n][1] is not mixed), key)
        if top not in result:
            result[top] = value
    return result

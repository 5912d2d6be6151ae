"""Greedy device placement that keeps room for the largest layer still to place.

This is the plan ``infer_auto_device_map`` makes by default: devices are filled in order, and
the main devices (the first GPU and the CPU, or ``"mps"``, or the CPU alone) keep free the size
of the largest layer not placed yet, in case it is offloaded and must run there. The decisions,
their order and the messages follow the documented behaviour of ``infer_auto_device_map``; the
bookkeeping is incremental so a model with 100k modules is planned in well under a second.
"""

from __future__ import annotations

import bisect
import logging
import warnings
from collections.abc import Mapping
from typing import Any, Union

import torch
from torch import nn

from ._memory_budget import DeviceKey
from ._sizes import compute_module_total_buffer_size, scan_modules

logger = logging.getLogger("accel_bigmodel.modeling")

_Entry = tuple[str, Any]


def _children(module: Any) -> list[tuple[str, nn.Module]]:
    """Direct submodules (each object once), as ``named_children`` lists them."""
    if not isinstance(module, nn.Module):
        return []
    seen: set[int] = set()
    found: list[tuple[str, nn.Module]] = []
    for key, child in module._modules.items():
        if child is not None and id(child) not in seen:
            seen.add(id(child))
            found.append((key, child))
    return found


def _parts(name: str, module: nn.Module) -> list[_Entry]:
    """What a split module is replaced by: its direct parameters, then its submodules."""
    own = [(f"{name}.{k}", p) for k, p in module._parameters.items() if p is not None]
    return own + [(f"{name}.{k}", c) for k, c in _children(module)]


class _Layers:
    """The layers of the module tree (a module without submodules, or of a class that is never
    split) and, for every module, the size of the largest layer at or under it."""

    def __init__(self, model: nn.Module, sizes: Mapping[str, int], no_split: set[str]) -> None:
        self.index: dict[str, int] = {}
        self.names: list[str] = []
        self.is_layer: list[bool] = []
        self.kids: list[list[int]] = []
        parents: list[int] = []
        stack: list[tuple[str, nn.Module, int]] = [("", model, -1)]
        while stack:
            name, module, parent = stack.pop()
            at = len(self.names)
            self.index[name] = at
            self.names.append(name)
            parents.append(parent)
            self.kids.append([])
            if parent >= 0:
                self.kids[parent].append(at)
            children = _children(module)
            # The model itself is always opened up: its parts are what get placed.
            layer = parent >= 0 and (not children or type(module).__name__ in no_split)
            self.is_layer.append(layer)
            if not layer:
                prefix = f"{name}." if name else ""
                stack.extend((prefix + k, c, at) for k, c in reversed(children))
        count = len(self.names)
        self.largest = [sizes.get(n, 0) if lay else 0 for n, lay in zip(self.names, self.is_layer)]
        self.end = list(range(1, count + 1))
        for at in range(count - 1, 0, -1):
            parent = parents[at]
            self.largest[parent] = max(self.largest[parent], self.largest[at])
            self.end[parent] = max(self.end[parent], self.end[at])

    def reaching(self, at: int, size: int) -> list[int]:
        """Indices of the layers at or under node ``at`` whose size is ``size``."""
        found: list[int] = []
        stack = [at]
        while stack:
            node = stack.pop()
            if self.is_layer[node]:
                found.append(node)
            else:
                stack.extend(k for k in reversed(self.kids[node]) if self.largest[k] == size)
        return found


class _Largest:
    """The largest layer still to place, and the layers that reach it (forgotten as they are
    taken; the size is measured again once none is left, or after a split)."""

    def __init__(self, layers: _Layers, sizes: Mapping[str, int]) -> None:
        self.layers = layers
        self.sizes = sizes
        self.size = 0
        self.marks: list[int] = []  # sorted tree indices of the layers reaching ``size``
        self.tensors: set[str] = set()  # model-level tensors reaching it (first measure only)

    def measure(self, queue: list[_Entry], with_tensors: bool = False) -> None:
        """Measure over ``queue`` (stored back to front), modules only unless ``with_tensors``."""
        layers = self.layers
        best = 0
        present: list[tuple[int | str, int]] = []
        for name, obj in reversed(queue):
            if isinstance(obj, nn.Module):
                at = layers.index.get(name)
                size = layers.largest[at] if at is not None else 0
            elif with_tensors:
                at, size = None, self.sizes.get(name, 0)
            else:
                continue
            present.append((at if at is not None else name, size))
            best = max(best, size)
        self.size = best
        self.tensors = set()
        marks: list[int] = []
        for key, size in present:
            if size != best:
                continue
            if isinstance(key, str):
                self.tensors.add(key)
            else:
                marks.extend(layers.reaching(key, best))
        self.marks = sorted(marks)

    def take(self, name: str) -> bool:
        """Forget the layers at or under ``name``; whether any layer is still known."""
        self.tensors.discard(name)
        at = self.layers.index.get(name)
        if at is not None and self.marks:
            low = bisect.bisect_left(self.marks, at)
            high = bisect.bisect_left(self.marks, self.layers.end[at])
            del self.marks[low:high]
        return bool(self.marks or self.tensors)


def _tied_outside(name: str, tied: list[list[str]]) -> list[str]:
    """Parameters tied to one under ``name`` but held outside it (names compared with a dot
    after them, so ``a.weight`` is not inside ``a.weight_x``)."""
    inside = f"{name}."
    outside: list[str] = []
    for group in tied:
        hits = [inside in f"{p}." for p in group]
        if any(hits) and not all(hits):
            outside.extend(p for p, hit in zip(group, hits) if not hit)
    return outside


class _Plan:
    """One pass over the queue of units still to place (stored back to front)."""

    def __init__(
        self,
        model: nn.Module,
        budget: Mapping[DeviceKey, int],
        no_split: set[str],
        dtype: Union[str, torch.dtype, None],
        special_dtypes: Mapping[str, Union[str, torch.dtype]] | None,
        verbose: bool,
    ) -> None:
        scan = scan_modules(model, dtype=dtype, special_dtypes=special_dtypes)
        self.sizes = scan.sizes
        self.tied = sorted(sorted(names) for names in scan.shared.values())
        self.no_split = no_split
        self.verbose = verbose
        self.dtype = dtype
        self.special_dtypes = special_dtypes
        self.largest = _Largest(_Layers(model, self.sizes, no_split), self.sizes)
        first = [
            *((k, p) for k, p in model._parameters.items() if p is not None),
            *_children(model),
            *((k, b) for k, b in model._buffers.items() if b is not None),
        ]
        self.queue: list[_Entry] = list(reversed(first))
        self.queued = {name for name, _ in first}
        self.largest.measure(self.queue, with_tensors=True)
        self.budget = budget

    def say(self, message: str) -> None:
        if self.verbose:
            print(message)

    def push_front(self, entries: list[_Entry]) -> None:
        self.queue.extend(reversed(entries))
        self.queued.update(name for name, _ in entries)

    def front_to_back(self) -> list[_Entry]:
        return list(reversed(self.queue))

    def replace(self, entries: list[_Entry]) -> None:
        self.queue = list(reversed(entries))
        self.queued = {name for name, _ in entries}

    def splittable(self, obj: Any) -> bool:
        return bool(_children(obj)) and type(obj).__name__ not in self.no_split

    def with_ties(self, name: str, size: int, outside: list[str]) -> tuple[int, list[_Entry]]:
        """Size of ``name`` with the queued units holding its tied parameters, and those units."""
        total = size
        owners: list[_Entry] = []
        for param in outside:
            owner = param
            while "." in owner:
                owner = owner.rsplit(".", 1)[0]
                if owner in self.queued:
                    break
            else:
                continue  # already placed with another unit
            obj = next(o for n, o in reversed(self.queue) if n == owner)
            owners.append((owner, obj))
            total += self.sizes.get(owner, 0) - self.sizes.get(param, 0)
        return total, owners

    def remove(self, name: str) -> None:
        if name in self.queued:
            self.queued.discard(name)
            self.queue = [entry for entry in self.queue if entry[0] != name]


def plan_reserving_largest_layer(
    model: nn.Module,
    budget: Mapping[DeviceKey, int],
    no_split: set[str],
    dtype: Union[str, torch.dtype, None],
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None,
    verbose: bool,
    offload_buffers: bool,
    fallback: bool,
    to_disk: bool,
) -> dict[str, DeviceKey]:
    """Place ``model`` on the devices of ``budget`` in order, keeping room on the main devices
    for the largest layer not placed yet (see ``infer_auto_device_map``).

    Returns:
        The device map, not cleaned.

    Raises:
        ValueError: With ``to_disk=False``, when a unit fits on no device, or a main device gets
            nothing because of the room it keeps for the largest layer.
    """
    from ._placement_helpers import check_tied_parameters_in_config  # imports this module's users

    devices = list(budget)
    if to_disk and "disk" not in devices:
        devices.append("disk")
    gpus = [d for d in devices if d not in ("cpu", "disk")]
    if "mps" in gpus:
        main: list[DeviceKey] = ["mps"]
    else:
        main = [gpus[0], "cpu"] if gpus else ["cpu"]
    plan = _Plan(model, budget, no_split, dtype, special_dtypes, verbose)
    if not plan.tied and check_tied_parameters_in_config(model):
        logger.warning(
            "The model's config ties weights but no parameters are tied; call the model's "
            "tie_weights() before infer_auto_device_map so tied weights are placed together."
        )
    largest = plan.largest
    device_map: dict[str, DeviceKey] = {}
    used: dict[DeviceKey, int] = dict.fromkeys(devices, 0)
    buffers: dict[DeviceKey, int] = {}
    empty: dict[DeviceKey, int] = {}
    tried: set[DeviceKey] = set()
    pending: str | None = None
    current = 0
    while plan.queue:
        name, obj = plan.queue.pop()
        plan.queued.discard(name)
        if not largest.take(name):
            largest.measure(plan.queue)
        size = plan.sizes.get(name, 0)
        outside = _tied_outside(name, plan.tied) if plan.tied else []
        device = devices[current]
        capacity = None if device == "disk" else budget[device]
        reserved = 0
        if capacity is not None and device in main:
            reserved = largest.size
            capacity -= reserved
        total, owners = plan.with_ties(name, size, outside) if outside else (size, [])
        if capacity is None or used[device] + total <= capacity:
            extra = f" with {[n for n, _ in owners]}" if owners else ""
            room = "" if capacity is None else f", {capacity - used[device]} bytes free"
            plan.say(f"Putting {name}{extra} ({total} bytes{room}) on {device}.")
            used[device] += total
            device_map[name] = device
            for owner, _ in owners:
                plan.remove(owner)
                device_map[owner] = device
            if not offload_buffers and isinstance(obj, nn.Module):
                buffers[device] = buffers.get(device, 0) + compute_module_total_buffer_size(
                    obj, dtype=plan.dtype, special_dtypes=plan.special_dtypes
                )
            continue
        assert capacity is not None  # the disk takes everything
        if outside and used[device] + size <= capacity:
            # The unit fits alone: split the first unit holding its tied weights that can be.
            split = next(((n, o) for n, o in owners if plan.splittable(o)), None)
            if split is not None:
                plan.say(f"{name} fits on {device} without its tied weights; splitting {split[0]}.")
                entries = plan.front_to_back()
                at = next(i for i, (n, _) in enumerate(entries) if n == split[0])
                plan.replace(
                    [(name, obj), *entries[:at], *_parts(split[0], split[1]), *entries[at + 1 :]]
                )
                largest.measure(plan.queue)
                continue
        if used[device] + size >= capacity and plan.splittable(obj):
            plan.say(f"{name} ({size} bytes) does not fit on {device}; splitting it.")
            plan.push_front(_parts(name, obj))
            largest.measure(plan.queue)
            continue
        if name == pending:
            # The unit the fallback found does not fit after all (tied weights counted here):
            # stop looking on this device rather than loop.
            tried.add(device)
        if used[device] == 0 and fallback and device != "disk" and device not in tried:
            from ._placement_helpers import fallback_allocate

            limit = budget[device] - max(largest.size, total)
            found, found_obj, rest = (
                fallback_allocate(
                    plan.front_to_back(), plan.sizes, limit, sorted(no_split), plan.tied
                )
                if limit >= 0
                else (None, None, [])
            )
            if found is not None:
                plan.say(f"Nothing fits on {device} before {found}, which does: placing it first.")
                plan.replace([(found, found_obj), (name, obj), *rest])
                pending = found
                continue
        if used[device] == 0:
            empty[device] = total + reserved
        used[device] += reserved
        plan.say(f"{name} ({total} bytes) cannot be split and does not fit on {device}.")
        if current + 1 >= len(devices):
            raise ValueError(
                f"Every module must fit on a device of max_memory; {name!r} needs {total} bytes "
                f"but the last device {device!r} has {max(capacity - used[device] + reserved, 0)} "
                f"bytes left (max_memory={dict(budget)}). Raise max_memory, add 'disk' to it "
                "(with an offload folder), or list fewer no_split_module_classes."
            )
        current += 1
        plan.push_front([(name, obj)])
    _warn_buffers(budget, gpus, used, buffers, offload_buffers)
    _report_empty(empty, budget, main, devices, to_disk)
    return device_map


def _warn_buffers(
    budget: Mapping[DeviceKey, int],
    gpus: list[DeviceKey],
    used: Mapping[DeviceKey, int],
    buffers: Mapping[DeviceKey, int],
    offload_buffers: bool,
) -> None:
    """Warn when the buffers of offloaded modules (kept on the execution device) fit in no GPU."""
    offloaded = buffers.get("cpu", 0) + buffers.get("disk", 0)
    if offload_buffers or not offloaded or not gpus:
        return
    if any(budget[g] >= offloaded + used.get(g, 0) for g in budget if g not in ("cpu", "disk")):
        return
    warnings.warn(
        f"Modules offloaded to the CPU or disk keep {offloaded} bytes of buffers on the "
        "execution device, which fit in no GPU's remaining max_memory; the model may run out "
        "of memory there. Pass offload_buffers=True to offload those buffers too.",
        UserWarning,
        stacklevel=4,
    )


def _report_empty(
    empty: Mapping[DeviceKey, int],
    budget: Mapping[DeviceKey, int],
    main: list[DeviceKey],
    devices: list[DeviceKey],
    to_disk: bool,
) -> None:
    """Log (or, with ``to_disk=False``, refuse) the devices that received nothing."""
    if not empty:
        return
    needs = "; ".join(f"{device!r} needs at least {need} bytes" for device, need in empty.items())
    if not to_disk:
        starved = [d for d in empty if d in main and d in budget and d != devices[-1]]
        if starved:
            device = starved[0]
            raise ValueError(
                f"A main device must hold the largest offloaded layer besides its first module; "
                f"{device!r} has max_memory {budget[device]} bytes and received nothing "
                f"({needs}). Raise max_memory[{device!r}] to at least {empty[device]} bytes, "
                "or split the large layers (remove their class from no_split_module_classes)."
            )
    logger.info(
        "No module could be placed on some devices for insufficient memory (%s). These "
        "minimums hold for this plan only; raise those budgets to use the devices.",
        needs,
    )

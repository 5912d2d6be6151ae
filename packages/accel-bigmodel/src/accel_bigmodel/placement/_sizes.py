"""Byte sizes of dtypes, files and modules (the memory budgets per device are in
``_memory_budget``)."""

from __future__ import annotations

import gc
from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Union

import torch
from torch import nn

# Storage types without a torch.dtype, by name (``CustomDtype`` values included).
_SUB_BYTE_DTYPES = {"int4": 0.5, "int2": 0.25, "fp4": 0.5, "nf4": 0.5, "fp8": 1}


def resolve_dtype(dtype: Union[str, torch.dtype, None]) -> torch.dtype | None:
    """Turns ``"float16"``, ``"torch.float16"`` or a ``torch.dtype`` into a ``torch.dtype``."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype.strip()
        if name.startswith("torch."):
            name = name[len("torch.") :]
        candidate = getattr(torch, name, None)
        if isinstance(candidate, torch.dtype):
            return candidate
    raise ValueError(
        f"A dtype must be a torch.dtype or the name of one (like 'float16' or 'bfloat16'); got "
        f"{dtype!r}, which torch does not define. Use one of 'float32', 'float16', 'bfloat16', "
        f"'int8' ..."
    )


def dtype_byte_size(dtype: Union[torch.dtype, str]) -> float:
    """Returns the number of bytes one element of ``dtype`` occupies.

    ``torch.bool`` counts as 1/8 and the names ``"int4"`` / ``"int2"`` as 1/2 and 1/4 (for memory
    estimates of quantized weights).

    Args:
        dtype: A ``torch.dtype`` or its name.

    Returns:
        The size in bytes (a float for sub-byte types, an int otherwise).

    Example:
        >>> dtype_byte_size(torch.float32)
        4
    """
    if isinstance(getattr(dtype, "value", None), str):  # a CustomDtype member
        dtype = dtype.value  # type: ignore[union-attr]
    if isinstance(dtype, str) and dtype.lower() in _SUB_BYTE_DTYPES:
        return _SUB_BYTE_DTYPES[dtype.lower()]
    resolved = resolve_dtype(dtype)
    assert resolved is not None
    if resolved == torch.bool:
        return 1 / 8
    return resolved.itemsize


def _tensor_size(tensor: torch.Tensor, dtype: torch.dtype | None) -> int:
    if dtype is not None and tensor.is_floating_point():
        return int(tensor.numel() * dtype_byte_size(dtype))
    return int(tensor.numel() * dtype_byte_size(tensor.dtype))


def named_module_tensors(
    module: nn.Module,
    include_buffers: bool = True,
    recurse: bool = False,
    remove_non_persistent: bool = False,
) -> Iterable[tuple[str, torch.Tensor]]:
    """Yields ``(name, tensor)`` for the parameters (and buffers) of a module.

    Args:
        module: The module to walk.
        include_buffers: Also yield buffers.
        recurse: Walk submodules too (names are then dotted paths).
        remove_non_persistent: Skip buffers registered with ``persistent=False``.
    """
    yield from module.named_parameters(recurse=recurse)
    if include_buffers:
        skip: set[str] = set()
        if remove_non_persistent:
            skip = get_non_persistent_buffers(module, recurse=recurse, fqns=True)
        for name, buf in module.named_buffers(recurse=recurse):
            if name not in skip:
                yield name, buf


def get_non_persistent_buffers(
    module: nn.Module, recurse: bool = False, fqns: bool = False
) -> set[str]:
    """Returns the names of the buffers registered with ``persistent=False``.

    Args:
        module: The module to inspect.
        recurse: Also look in every submodule.
        fqns: With ``recurse``, return dotted names relative to ``module``
            (``"block.mask"``); otherwise submodules' buffers are named by their own name only.
    """
    names = set(module._non_persistent_buffers_set)
    if recurse:
        for prefix, sub in module.named_modules():
            if prefix:
                own = sub._non_persistent_buffers_set
                names.update(f"{prefix}.{n}" for n in own) if fqns else names.update(own)
    return names


def walk_modules(model: nn.Module, remove_duplicate: bool = True) -> list[tuple[str, nn.Module]]:
    """``named_modules()`` in the same (pre-)order, iteratively: fast on 100k-module models."""
    found: list[tuple[str, nn.Module]] = []
    seen: set[int] = set()
    stack: list[tuple[str, nn.Module]] = [("", model)]
    while stack:
        name, module = stack.pop()
        if remove_duplicate:
            if id(module) in seen:
                continue
            seen.add(id(module))
        found.append((name, module))
        prefix = f"{name}." if name else ""
        children = [(prefix + k, m) for k, m in module._modules.items() if m is not None]
        stack.extend(reversed(children))
    return found


def compute_module_sizes(
    model: nn.Module,
    dtype: Union[str, torch.dtype, None] = None,
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None = None,
    buffers_only: bool = False,
) -> dict[str, int]:
    """Computes the size in bytes of every submodule, parameter and buffer of a model.

    Works on meta tensors (a model built under [`init_empty_weights`][accel_bigmodel.init_empty_weights]). A tensor shared by
    several modules (tied weights) is counted once, where it first appears. One pass over the
    modules, so the cost is linear in the model's size.

    Args:
        model: The model to analyze.
        dtype: If given, floating-point tensors are counted as if cast to this dtype.
        special_dtypes: Per-tensor dtype overrides (full dotted names), applied over ``dtype``.
        buffers_only: Count buffers only.

    Returns:
        A mapping from dotted names (``""`` for the whole model) to bytes; missing names read 0.
    """
    with gc_paused():
        return scan_modules(model, dtype, special_dtypes, buffers_only).sizes


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pauses the cyclic garbage collector inside the block.

    The collector would rescan the whole module graph many times while a pass over a
    100k-module model allocates small objects; pausing it keeps such passes linear.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


@dataclass
class ModuleScan:
    """What one pre-order pass over a model's submodules found (each module listed once)."""

    modules: list[tuple[str, nn.Module]]
    """``(dotted name, module)`` in ``named_modules()`` order."""
    parents: list[int]
    """Index in ``modules`` of each module's parent (``-1`` for the root)."""
    kinds: list[type]
    """Class of each module."""
    has_children: list[bool]
    """Whether each module registers submodules (``_modules`` is not empty)."""
    own: list[int]
    """Bytes of each module's direct tensors, counting a shared tensor only where it first appears."""
    totals: list[int]
    """Bytes of each module with its submodules (the same numbers as ``sizes``)."""
    sizes: dict[str, int]
    """Bytes of every module (with its submodules) and every tensor, by dotted name; missing
    names read 0."""
    shared: dict[int, list[str]]
    """Names of each parameter reachable under more than one name, by ``id`` of the tensor."""


def scan_modules(
    model: nn.Module,
    dtype: Union[str, torch.dtype, None] = None,
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None = None,
    buffers_only: bool = False,
) -> ModuleScan:
    """Walks the submodules of ``model`` once, sizing every tensor and module.

    Each module and tensor is touched once and every name is built once, so the cost is linear
    in the model's size with a small constant (100k-module models take well under a second).
    Arguments are as for [`compute_module_sizes`][accel_bigmodel.compute_module_sizes].
    """
    target = resolve_dtype(dtype)
    special = {k: resolve_dtype(v) for k, v in (special_dtypes or {}).items()}
    modules: list[tuple[str, nn.Module]] = []
    parents: list[int] = []
    kinds: list[type] = []
    has_children: list[bool] = []
    own: list[int] = []
    sizes: dict[str, int] = defaultdict(int)
    first_name: dict[int, str] = {}
    shared: dict[int, list[str]] = {}
    per_dtype: dict[torch.dtype, int | float] = {}
    visited: set[int] = set()
    stack: list[tuple[str, nn.Module, int]] = [("", model, -1)]
    # Bound methods: this loop runs once per module and tensor of models with 100k modules.
    first_seen, push = first_name.setdefault, stack.append
    while stack:
        name, module, parent = stack.pop()
        if id(module) in visited:
            continue
        visited.add(id(module))
        index = len(modules)
        modules.append((name, module))
        parents.append(parent)
        kinds.append(type(module))
        prefix = f"{name}." if name else ""
        total = 0
        params, buffers = module._parameters, module._buffers
        for group in (params, buffers) if buffers else (params,):
            if not group or (buffers_only and group is params):
                continue
            is_param = group is params
            for key, tensor in group.items():
                if tensor is None:
                    continue
                full = prefix + key
                # The name stored first for this tensor comes back unless this is the first time.
                seen_as = first_seen(id(tensor), full)
                if seen_as is not full:
                    if is_param:
                        shared.setdefault(id(tensor), [seen_as]).append(full)
                    continue
                chosen = special.get(full, target) if special else target
                if chosen is target:
                    itemsize = per_dtype.get(tensor.dtype)
                    if itemsize is None:
                        itemsize = per_dtype[tensor.dtype] = _itemsize(tensor.dtype, target)
                else:
                    itemsize = _itemsize(tensor.dtype, chosen)
                size = tensor.numel() * itemsize
                if type(size) is not int:  # sub-byte dtypes
                    size = int(size)
                sizes[full] = size
                total += size
        own.append(total)
        children = module._modules
        has_children.append(bool(children))
        if children:
            for key, child in reversed(children.items()):
                if child is not None:
                    push((prefix + key, child, index))
    totals = own.copy()
    for index in range(len(modules) - 1, 0, -1):
        totals[parents[index]] += totals[index]
    for (name, _), total in zip(modules, totals):
        sizes[name] = total
    return ModuleScan(modules, parents, kinds, has_children, own, totals, sizes, shared)


def _itemsize(stored: torch.dtype, target: torch.dtype | None) -> float:
    """Bytes per element of a tensor stored as ``stored`` when floating point counts as ``target``."""
    if target is not None and stored.is_floating_point:
        return dtype_byte_size(target)
    return dtype_byte_size(stored)


def compute_module_total_buffer_size(
    model: nn.Module,
    dtype: Union[str, torch.dtype, None] = None,
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None = None,
) -> int:
    """Returns the total size in bytes of the buffers of ``model``."""
    return compute_module_sizes(model, dtype, special_dtypes, buffers_only=True).get("", 0)


def get_max_layer_size(
    modules: list[tuple[str, Any]],
    module_sizes: Mapping[str, int],
    no_split_module_classes: list[str],
) -> tuple[int, list[str]]:
    """Returns the size of the largest layer among ``modules`` and the names reaching it.

    A layer is a module with no children, a module whose class is in
    ``no_split_module_classes``, or a lone parameter/buffer. Modules with children are explored
    (once each, so the cost is linear in the number of modules).

    Args:
        modules: ``(name, module_or_tensor)`` pairs to scan.
        module_sizes: Sizes as returned by [`compute_module_sizes`][accel_bigmodel.compute_module_sizes].
        no_split_module_classes: Class names of modules that must not be split.

    Returns:
        ``(max_size, names)``.
    """
    no_split = set(no_split_module_classes or [])
    best = 0
    names: list[str] = []
    stack = list(reversed(modules))
    while stack:
        name, obj = stack.pop()
        children = [] if not isinstance(obj, nn.Module) else list(obj.named_children())
        if isinstance(obj, nn.Module) and children and type(obj).__name__ not in no_split:
            stack.extend(reversed([(f"{name}.{n}" if name else n, m) for n, m in children]))
            continue
        size = module_sizes.get(name, 0)
        if size > best:
            best, names = size, [name]
        elif size == best:
            names.append(name)
    return best, names


def calculate_maximum_sizes(model: nn.Module) -> tuple[int, tuple[int, list[str]]]:
    """Computes the total size of the model and its largest layer.

    Uses ``model._no_split_modules`` (set by ``transformers`` models) as the unsplittable classes.

    Returns:
        ``(total_size, (largest_layer_size, largest_layer_names))``.
    """
    sizes = compute_module_sizes(model)
    no_split = list(getattr(model, "_no_split_modules", None) or [])
    modules: list[tuple[str, Any]] = [
        *model.named_parameters(recurse=False),
        *model.named_children(),
        *model.named_buffers(recurse=False),
    ]
    return sizes[""], get_max_layer_size(modules, sizes, no_split)


def convert_bytes(size: float) -> str:
    """A byte count written with its unit, rounded to 2 decimals: ``"1.5 GB"``."""
    for unit in ("bytes", "KB", "MB", "GB", "TB"):
        if size < 1024.0:
            return f"{round(size, 2)} {unit}"
        size /= 1024.0
    return f"{round(size, 2)} PB"

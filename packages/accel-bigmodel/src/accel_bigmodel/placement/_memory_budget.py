"""Memory budgets per device: what each device can hold (``get_max_memory``) and a budget that
spreads a model evenly over the accelerators (``get_balanced_memory``)."""

from __future__ import annotations

import logging
import operator
import os
from collections.abc import Mapping, MutableMapping
from typing import Any, Union

import torch
from torch import nn

from ._budget_numbers import Budget, budget_value
from ._devices import DeviceMapError, _problem, check_device, describe_devices
from ._sizes import compute_module_sizes

logger = logging.getLogger("accel_bigmodel.modeling")

DeviceKey = Union[int, str]
"""A device of a ``max_memory`` or ``device_map``: an accelerator index, or a name."""


def proc_kib_field(path: str, name: str) -> int | None:
    """The ``name:  <n> kB`` line of a ``/proc`` file (``/proc/meminfo``, ``/proc/self/status``)
    in bytes; ``None`` where the file or the line is missing."""
    try:
        with open(path) as fh:
            for line in fh:
                if line.startswith(name + ":"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


def _available_cpu_memory() -> int:
    available = proc_kib_field("/proc/meminfo", "MemAvailable")
    if available is not None:
        return available
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _accelerator_memory() -> dict[DeviceKey, int]:
    found: dict[DeviceKey, int] = {}
    if torch.cuda.is_available():
        for i in range(torch.cuda.device_count()):
            try:
                found[i] = torch.cuda.mem_get_info(i)[0]
            except Exception:  # a listed device may be unusable; skip it like an absent one
                continue
    elif hasattr(torch, "xpu") and torch.xpu.is_available():
        for i in range(torch.xpu.device_count()):
            try:
                found[i] = torch.xpu.mem_get_info(i)[0]
            except Exception:
                continue
    return found


_DEVICE_ORDER = ("mps", "cpu", "disk")


def _memory_key(key: Any, check_devices: bool) -> DeviceKey:
    """The canonical ``max_memory`` key for ``key`` (checked against this machine)."""
    original = key
    if isinstance(key, str) and key.strip().isdecimal():
        key = int(key)
    if isinstance(key, torch.device):
        key = key.index if key.type not in ("cpu", "mps") and key.index is not None else key.type
    elif not isinstance(key, str) and hasattr(type(key), "__index__"):
        try:
            key = operator.index(key)  # numpy and torch integers name a GPU as an int does
        except TypeError:
            pass
    is_index = isinstance(key, int)
    if not is_index and key not in _DEVICE_ORDER:
        raise DeviceMapError(
            f"max_memory keys must be GPU indices (int), 'mps', 'cpu' or 'disk'; got "
            f"{original!r}. Devices here: {describe_devices()}. Write e.g. "
            f"max_memory={{0: '10GiB', 'cpu': '30GiB'}}."
        )
    if check_devices and key != "disk":
        check_device(
            key,
            f"The max_memory key {original!r}",
            "Remove that key; to plan a map for a machine that has it, leave "
            "check_devices=False (the default of the planning functions).",
        )
    return key


def get_max_memory(
    max_memory: Mapping[Any, Any] | None = None,
    *,
    check_devices: bool = False,
) -> dict[DeviceKey, Budget]:
    """Returns the memory budget of each device, in bytes, ordered GPUs first, then cpu, then disk.

    A plan is not a placement: GPU indices this machine lacks are accepted (a warning is
    logged), so maps can be planned for the machine a model will run on. The functions that
    move weights (``dispatch_model``, ``load_checkpoint_in_model`` ...) check the devices.

    As in the reference library, string sizes of the caller's dict are converted in place
    (``{"cpu": "60KB"}`` becomes ``{"cpu": 60000}``): code that passes its dict on after this
    call (transformers' ``from_pretrained`` does) sees integers. Numbers are kept as the
    reference keeps them: a float stays a float (transformers passes back 90% of the measured
    memory), numpy and torch scalars become the Python number of the same value, a negative
    budget is a device that holds nothing, and ``None`` is a device without a limit.

    Args:
        max_memory: Device -> budget (bytes as any number, a string like ``"10GiB"``, or
            ``None``). Keys are GPU indices (``int`` or any integer type), ``torch.device``,
            ``"mps"``, ``"cpu"`` or ``"disk"``. If ``None``, the free memory of every
            accelerator and the available RAM are measured.
        check_devices: Refuse GPU indices (and ``"mps"``) that this machine does not have,
            instead of logging a warning.

    Returns:
        A new dict: integer budgets for strings and integral numbers, floats for the other
        numbers, ``None`` kept.

    Raises:
        DeviceMapError: On a device key that is unknown (or absent here, with
            ``check_devices=True``), a duplicate key, a size string that cannot be read, NaN,
            or a value that is not a number; the message names the entry.
    """
    if max_memory is None:
        result: dict[DeviceKey, Budget] = dict(_accelerator_memory())
        if torch.backends.mps.is_available():
            result["mps"] = _available_cpu_memory()
        else:
            result["cpu"] = _available_cpu_memory()
        return result
    if not isinstance(max_memory, Mapping):
        raise DeviceMapError(
            f"max_memory must be a dict of device -> size; got {type(max_memory).__name__} "
            f"{max_memory!r}. Write e.g. max_memory={{0: '10GiB', 'cpu': '30GiB'}}."
        )
    converted: dict[DeviceKey, Budget] = {}
    written: dict[DeviceKey, Any] = {}
    for original, value in max_memory.items():
        key = _memory_key(original, check_devices)
        if key in converted:
            raise DeviceMapError(
                f"max_memory must name each device once; {written[key]!r} and {original!r} both "
                f"mean device {key!r}. Keep one of them."
            )
        try:
            converted[key] = budget_value(value)
        except ValueError as error:
            raise DeviceMapError(
                f"max_memory[{original!r}] is not a usable size: {error}"
            ) from None
        written[key] = original
    if isinstance(max_memory, MutableMapping):
        # Every entry was valid: only now write the integers back, so a refusal changes nothing.
        for key, original in written.items():
            if isinstance(max_memory[original], str):
                max_memory[original] = converted[key]
    gpus = sorted(k for k in converted if isinstance(k, int))
    if gpus and not check_devices:
        absent = [g for g in gpus if _problem(g) is not None]
        if absent:
            logger.warning(
                "max_memory names GPU %s, which this machine does not have (devices here: %s); "
                "the budget is kept for planning, and placing weights there will be refused.",
                ", ".join(map(str, absent)),
                describe_devices(),
            )
    order: list[DeviceKey] = [*gpus, *(k for k in _DEVICE_ORDER if k in converted)]
    return {k: converted[k] for k in order}


def _at_most(limit: Union[int, float], budget: Budget) -> Budget:
    """The smaller of ``limit`` and ``budget`` (``None``: no limit)."""
    return limit if budget is None else min(limit, budget)


def get_balanced_memory(
    model: nn.Module,
    max_memory: Mapping[Any, Any] | None = None,
    no_split_module_classes: list[str] | None = None,
    dtype: Union[str, torch.dtype, None] = None,
    special_dtypes: Mapping[str, Union[str, torch.dtype]] | None = None,
    low_zero: bool = False,
    *,
    check_devices: bool = False,
) -> dict[DeviceKey, Budget]:
    """Computes a ``max_memory`` that spreads the model evenly over the available GPUs.

    Each GPU but the last gets ``model_size / n_gpus`` plus a margin (the largest unsplittable
    block or 1.25x the mean leaf size, whichever is larger). With ``low_zero`` GPU 0 only gets
    what the others cannot hold. With fewer than two GPUs the budget is returned unchanged,
    except that a measured single GPU keeps 10% free (as in the reference, the result is then
    a float).

    Args:
        model: The model to analyze (may be on the meta device).
        max_memory: Device -> budget, read as [`get_max_memory`][accel_bigmodel.get_max_memory] reads it (a GPU whose
            budget is ``None`` has no limit); measured when ``None``.
        no_split_module_classes: Class names of modules that must not be split.
        dtype: Count floating-point weights as this dtype.
        special_dtypes: Per-tensor dtype overrides.
        low_zero: Keep as little as possible on GPU 0 (useful for ``generate``).
        check_devices: Refuse devices this machine does not have (see [`get_max_memory`][accel_bigmodel.get_max_memory]).

    Returns:
        A new ``max_memory`` dict.

    Raises:
        DeviceMapError: On a bad ``max_memory`` entry (see [`get_max_memory`][accel_bigmodel.get_max_memory]).
    """
    user_set = max_memory is not None
    budget = get_max_memory(max_memory, check_devices=check_devices)
    gpus = [k for k, v in budget.items() if isinstance(k, int) and (v is None or v > 0)]
    if not gpus:
        return budget
    if len(gpus) == 1:
        measured = budget[gpus[0]]
        if not user_set and measured is not None:
            budget[gpus[0]] = measured * 0.9
        return budget
    if isinstance(no_split_module_classes, str):
        no_split_module_classes = [no_split_module_classes]
    sizes = compute_module_sizes(model, dtype=dtype, special_dtypes=special_dtypes)
    per_gpu = sizes[""] // (len(gpus) - 1 if low_zero else len(gpus))
    no_split = no_split_names(no_split_module_classes)
    block = 0
    leaf_sizes: list[int] = []
    for name, module in model.named_modules():
        if type(module).__name__ in no_split:
            block = max(block, sizes.get(name, 0))
        if name and not any(True for _ in module.children()):
            leaf_sizes.append(sizes.get(name, 0))
    mean_leaf = sum(leaf_sizes) // max(len(leaf_sizes), 1)
    per_gpu += int(1.25 * max(block, mean_leaf))
    for idx in gpus[:-1]:
        if not (low_zero and idx == gpus[0]):
            budget[idx] = _at_most(per_gpu, budget[idx])
    if low_zero:
        others = [budget[i] for i in gpus[1:]]
        left = 0 if None in others else max(0, sizes[""] - sum(v for v in others if v is not None))
        budget[gpus[0]] = _at_most(left, budget[gpus[0]])
    return budget


def no_split_names(value: Any) -> set[str]:
    """The class names of ``no_split_module_classes``: a list (any iterable) of names, one name,
    or ``None``.

    Raises:
        TypeError: for a value that is not a list of names (``5``), naming the rule and the fix.
    """
    if isinstance(value, str):
        return {value}
    try:
        return set(value or [])
    except TypeError:
        raise TypeError(
            "no_split_module_classes is a list of module class names never split across "
            f"devices (e.g. ['LlamaDecoderLayer']); got {type(value).__name__} {value!r}. Pass "
            "a list of class names, or None."
        ) from None

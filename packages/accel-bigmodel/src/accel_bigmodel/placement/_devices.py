"""Which devices this machine has, and the checks of every device a user names.

A ``device_map`` value or a ``max_memory`` key is checked here before anything is loaded, so a
typo (``"cpuu"``), a GPU this machine does not have (``"cuda:9"``, ``9``) or a negative index is
reported with the entry that holds it, the devices that exist, and the fix.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = [
    "DeviceMapError",
    "accelerator_count",
    "accelerator_type",
    "check_device",
    "describe_devices",
]

ALWAYS_VALID = ("cpu", "disk", "meta")
"""Device names valid on every machine (``"disk"`` needs an offload folder where it is used)."""


class DeviceMapError(ValueError):
    """A ``device_map`` or ``max_memory`` entry that cannot be used on this machine.

    Raised for a device that does not exist here, a value that is not a device, a module name
    the model does not have, a malformed or negative memory size, or ``"disk"`` without an
    offload folder. The message names the entry, the devices that exist, and the fix. It is a
    ``ValueError``, so code that caught ``ValueError`` keeps working.
    """


def accelerator_type() -> str | None:
    """The device type that GPU indices (``0``, ``1`` ...) stand for here, or ``None``.

    CUDA (also ROCm), then XPU, then whatever ``torch.accelerator`` reports (NPU, MLU, MUSA,
    HPU ... once their torch plugin is imported). Apple's MPS is a single device named ``"mps"``,
    never an index.
    """
    if torch.cuda.is_available():
        return "cuda"
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return "xpu"
    api = getattr(torch, "accelerator", None)
    if api is not None and api.is_available():
        current = api.current_accelerator()
        if current is not None and current.type not in ("mps", "cpu"):
            return str(current.type)
    return None


def accelerator_count(kind: str) -> int:
    """Number of devices of type ``kind`` (``"cuda"``, ``"xpu"``, ``"mps"`` ...) usable here."""
    if kind == "mps":
        return 1 if torch.backends.mps.is_available() else 0
    if kind in ALWAYS_VALID:
        return 1
    module = getattr(torch, kind, None)
    available = getattr(module, "is_available", None)
    count = getattr(module, "device_count", None)
    if not callable(available) or not callable(count):
        return 0
    try:
        return int(count()) if available() else 0
    except RuntimeError:  # a backend whose driver is present but broken counts as absent
        return 0


def describe_devices() -> str:
    """The devices of this machine, as a user would write them: ``'cpu', 'disk', 'meta', 0, 1``."""
    names = [repr(name) for name in ALWAYS_VALID]
    kind = accelerator_type()
    if kind is not None:
        count = accelerator_count(kind)
        names.extend(f"{i} (= '{kind}:{i}')" for i in range(count))
    if accelerator_count("mps"):
        names.append("'mps'")
    if kind is None and not accelerator_count("mps"):
        names.append("and no GPU")
    return ", ".join(names)


def _gpu_problem(kind: str, index: int) -> str | None:
    if index < 0:
        return f"a device index must be >= 0 (got {index})"
    count = accelerator_count(kind)
    if index >= count:
        seen = f"{count} {kind} device{'s' if count != 1 else ''}"
        return f"this machine has {seen}, so {kind}:{index} does not exist"
    return None


def _problem(value: Any) -> str | None:
    """Why ``value`` is not a usable device here, or ``None`` when it is."""
    if isinstance(value, bool):
        return f"a bool is not a device ({value!r})"
    if isinstance(value, int):
        kind = accelerator_type()
        if kind is None:
            if value < 0:
                return f"a device index must be >= 0 (got {value})"
            return f"the GPU index {value} needs a GPU, and this machine has none"
        return _gpu_problem(kind, value)
    if isinstance(value, str):
        if value in ALWAYS_VALID:
            return None
        if value.strip().isdecimal():
            return f"a GPU index is an int, not a string (write {int(value)}, not {value!r})"
        try:
            device = torch.device(value)
        except (RuntimeError, ValueError, TypeError):
            return f"{value!r} is not a device name"
    elif isinstance(value, torch.device):
        device = value
    else:
        return f"a {type(value).__name__} is not a device"
    if device.type in ("cpu", "meta"):
        return None
    if device.type == "mps":
        return None if accelerator_count("mps") else "this machine has no MPS device"
    return _gpu_problem(device.type, 0 if device.index is None else device.index)


def check_device(value: Any, entry: str, fix: str) -> None:
    """Raises [`DeviceMapError`][accel_bigmodel.DeviceMapError] unless ``value`` is a device of this machine.

    Valid everywhere: ``"cpu"``, ``"disk"``, ``"meta"`` (and ``torch.device`` / ``"cpu:0"``
    forms). An ``int`` is a GPU index of `accelerator_type`; ``"cuda:1"``, ``"xpu:0"``,
    ``"mps"`` ... are valid when that device exists.

    Args:
        value: The device the user wrote.
        entry: Where it was written, e.g. ``"device_map['head']"``.
        fix: The sentence telling how to fix it.

    Raises:
        DeviceMapError: Naming the entry, the value, the devices that exist here, and ``fix``.
    """
    problem = _problem(value)
    if problem is not None:
        raise DeviceMapError(
            f"{entry} must be a device of this machine; got {value!r}, but {problem}. Devices "
            f"here: {describe_devices()}. {fix}"
        )

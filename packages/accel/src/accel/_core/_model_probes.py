"""Questions about a model that decide how it is prepared: is it a PEFT model, is it compiled
by regions, does it repeat blocks, is it tensor-parallel."""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

import torch

from ._unwrap import extract_model_from_parallel, is_compiled_module


def is_peft_model(model: Any) -> bool:
    """Whether ``model`` (or the model inside accel's and torch's wrappers) is a PEFT model.

    Recognised without importing peft: the class or one of its bases is named ``PeftModel``,
    or the object carries PEFT's ``peft_config`` mapping and ``get_base_model`` method. Any other
    object, module or not, gives False.

    Args:
        model: Any object.
    """
    inner = extract_model_from_parallel(model) if isinstance(model, torch.nn.Module) else model
    if is_compiled_module(inner):
        inner = inner._orig_mod
    if "PeftModel" in {cls.__name__ for cls in inspect.getmro(type(inner))}:
        return True
    config = getattr(inner, "peft_config", None)
    return isinstance(config, Mapping) and callable(getattr(inner, "get_base_model", None))


def has_compiled_regions(module: torch.nn.Module) -> bool:
    """Whether a submodule of ``module`` (``module`` itself included when it has children) is
    the wrapper ``torch.compile`` returns, as ``compile_regions`` leaves it."""
    if not module._modules:
        return False
    return any(is_compiled_module(sub) for sub in module.modules())


def is_repeated_blocks(module: torch.nn.Module) -> bool:
    """Whether ``module`` is a non-empty ``torch.nn.ModuleList`` whose items are all of the
    first item's class (the blocks ``compile_regions`` compiles once)."""
    if not isinstance(module, torch.nn.ModuleList) or len(module) == 0:
        return False
    first = type(module[0])
    return all(isinstance(block, first) for block in module)


def has_repeated_blocks(module: torch.nn.Module) -> bool:
    """Whether ``module`` holds, at any depth, a ``ModuleList`` of repeated blocks."""
    if not module._modules:
        return False
    return any(is_repeated_blocks(sub) for sub in module.modules())


def model_has_dtensor(model: torch.nn.Module) -> bool:
    """Whether a parameter of ``model`` is a ``DTensor`` (sharded by FSDP2 or tensor
    parallelism)."""
    try:
        from torch.distributed.tensor import DTensor
    except ImportError:  # torch built without distributed support
        return False
    return any(isinstance(param, DTensor) for param in model.parameters())


def get_model_tp_size(model: torch.nn.Module) -> int | None:
    """The tensor-parallel degree a ``transformers`` model was sharded with, or None.

    Read from ``model.tp_size`` (transformers 4), else from ``model.config.distributed_config``
    (a dict or an object with ``tp_size``, transformers 5).
    """
    tp_size = getattr(model, "tp_size", None)
    if tp_size is not None:
        return int(tp_size)
    distributed = getattr(getattr(model, "config", None), "distributed_config", None)
    value = (
        distributed.get("tp_size")
        if isinstance(distributed, Mapping)
        else getattr(distributed, "tp_size", None)
    )
    return int(value) if value is not None else None


def check_quantized_placement(
    model: torch.nn.Module, device: torch.device, distributed: bool
) -> None:
    """Refuse to train a bitsandbytes 8-bit or 4-bit model where its weights cannot train.

    Such a model (``is_loaded_in_8bit`` / ``is_loaded_in_4bit``, placed by transformers with
    an ``hf_device_map``) cannot move, so it is checked where it is: not over several devices
    of a distributed run, not on another accelerator than this process's, and not offloaded to
    the CPU (unless bitsandbytes' multi-backend build runs it there; never with an XPU) or to
    disk.

    Raises:
        ValueError: naming the model's devices, the rule and the fix.
    """
    from accel_state import is_bitsandbytes_multi_backend_available, is_xpu_available

    quantized = getattr(model, "is_loaded_in_8bit", False) or getattr(
        model, "is_loaded_in_4bit", False
    )
    device_map = getattr(model, "hf_device_map", None)
    if not quantized or not device_map:
        return
    devices = set(device_map.values())
    shown = sorted(map(str, devices))
    if len(devices) > 1 and distributed:
        raise ValueError(
            "An 8-bit or 4-bit model spread over several devices cannot train in a distributed "
            f"run; its hf_device_map uses {shown}. Load it on one device per process "
            "(device_map={'': process_index}), or run one process (naive pipeline parallelism)."
        )
    bnb_on_cpu = is_bitsandbytes_multi_backend_available()
    cpu_in_map = "cpu" in devices and (not bnb_on_cpu or is_xpu_available())
    if cpu_in_map or "disk" in devices:
        raise ValueError(
            "An 8-bit or 4-bit model cannot train with CPU or disk offload; its hf_device_map "
            f"uses {shown}. Load it with every module on this process's accelerator "
            f"(device_map={{'': {str(device)!r}}}), or with more accelerator memory."
        )
    if len(devices) == 1 and not (device.type == "cpu" and bnb_on_cpu):
        (only,) = devices
        index = only if isinstance(only, int) else torch.device(only).index
        # A model on the first accelerator trains on a process whose device has no index.
        if torch.device(device.type, index) != device and (device.index is not None or index):
            raise ValueError(
                "An 8-bit or 4-bit model must train on the device it was loaded on; it is on "
                f"{only!r}, this process trains on {str(device)!r}. Load it with "
                f"device_map={{'': {str(device)!r}}}."
            )

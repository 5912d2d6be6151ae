"""Dispatching a model over devices, CPU and disk offload, and load-then-dispatch."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Mapping
from typing import Any, Union, cast

import torch
from torch import nn

import accel_bigmodel

from ..hooks._align_devices import (
    AlignDevicesHook,
    attach_align_device_hook,
    attach_align_device_hook_on_blocks,
)
from ..hooks._hooks import CpuOffload, UserCpuOffloadHook, add_hook_to_module
from ..hooks._prefetch_attach import attach_prefetcher
from ..offload._offload import (
    INDEX_FILE,
    OffloadedWeightsLoader,
    extract_submodules_state_dict,
    read_offload_index,
    save_offload_index,
    write_offload_file,
)
from ..placement._device_map_use import (
    check_device_map,
    check_map_devices,
    require_offload_folder,
    resolve_device_map,
)
from ..placement._devices import DeviceMapError, check_device
from ..placement._tensors import Device, find_tied_parameters, retie_parameters
from ._checkpoint_io import load_checkpoint_in_model

logger = logging.getLogger("accel_bigmodel.big_modeling")

PathLike = Union[str, "os.PathLike[str]"]


def _check_device_map(model: nn.Module, device_map: Mapping[str, Any]) -> None:
    """The check ``dispatch_model`` runs: ``accel_bigmodel.check_device_map``, looked up when
    called, so code that replaces it (transformers does, through the reference's path
    ``accelerate.big_modeling.check_device_map``, which forwards here) is obeyed; a
    replacement is called as the reference calls it, and the devices are still checked."""
    check = accel_bigmodel.check_device_map
    if check is check_device_map:
        check_device_map(model, device_map, check_devices=True)
    else:
        check(model, device_map)
        check_map_devices(device_map)


def _ensure_offloaded(
    model: nn.Module,
    disk_modules: list[str],
    offload_dir: PathLike,
    offload_buffers: bool,
) -> None:
    """Writes (once) the weights of disk modules that the offload index does not list yet."""
    index = read_offload_index(offload_dir)
    state = model.state_dict()
    buffers = {n for n, _ in model.named_buffers()}
    needed = extract_submodules_state_dict(state, disk_modules)
    absent = {
        n: t for n, t in needed.items() if n not in index and (offload_buffers or n not in buffers)
    }
    if not absent:
        return
    on_meta = [n for n, t in absent.items() if t.device.type == "meta"]
    if on_meta:
        raise ValueError(
            f"Weights sent to disk must be in the offload index or in the model; {on_meta[:5]} "
            f"are on the meta device and missing from {os.path.join(offload_dir, INDEX_FILE)}. "
            f"Load them with load_checkpoint_and_dispatch(..., offload_folder=...), or pass the "
            f"folder that holds their index."
        )
    number = (
        sum(1 for f in os.listdir(offload_dir) if f.startswith("dispatch-"))
        if os.path.isdir(offload_dir)
        else 0
    )
    entries = write_offload_file(
        offload_dir, f"dispatch-{number:05d}.safetensors", list(absent.items())
    )
    save_offload_index(entries, offload_dir)


def _guard_moves(model: nn.Module) -> None:
    def guard(fn: Any) -> Any:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if any(p.device.type == "meta" for p in model.parameters()):
                raise RuntimeError(
                    "A model with modules offloaded to the CPU or disk must not be moved as a "
                    "whole; its offloaded weights live outside it. Call "
                    "remove_hook_from_submodules(model) and load it fully first, or dispatch it "
                    "again with another device_map."
                )
            logger.warning("Moving a model dispatched with device hooks; hooks stay attached.")
            return fn(*args, **kwargs)

        return wrapper

    model.to = guard(model.to)  # type: ignore[method-assign]
    model.cuda = guard(model.cuda)  # type: ignore[method-assign]


def dispatch_model(
    model: nn.Module,
    device_map: Mapping[str, Any],
    main_device: Device | None = None,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    offload_dir: PathLike | None = None,
    offload_index: Mapping[str, Any] | None = None,
    offload_buffers: bool = False,
    skip_keys: Union[str, list[str], None] = None,
    preload_module_classes: list[str] | None = None,
    force_hooks: bool = False,
) -> nn.Module:
    """Places a model according to ``device_map`` and adds the hooks that make it run.

    Modules on GPUs run there; modules mapped to ``"cpu"`` (when the main device is a GPU) or to
    ``"disk"`` are offloaded: their weights are loaded on the main device only for their forward.
    Disk weights are memory-mapped safetensors (written once to ``offload_dir`` if they are not
    already there), and the next offloaded module's weights are prepared in a background thread
    while the current one runs.

    Args:
        model: The model to dispatch.
        device_map: Module name -> device (``int``, ``"cpu"``, ``"disk"``, ``"mps"`` ...).
        main_device: Device of the first and last layers and of offloaded execution (default: the
            first GPU of the map, else the CPU).
        state_dict: In-memory weights of the CPU-offloaded modules.
        offload_dir: Folder with ``index.json`` of the disk weights.
        offload_index: The disk index itself (instead of reading ``offload_dir``).
        offload_buffers: Offload buffers of offloaded modules too.
        skip_keys: Keyword arguments never moved between devices.
        preload_module_classes: Classes that load all their submodules' weights at once.
        force_hooks: Add hooks even when everything is on one device.

    Returns:
        The model, with ``model.hf_device_map`` set.

    Raises:
        DeviceMapError: On a device map that names devices this machine lacks, unknown modules,
            misses tensors, or sends modules to disk without an offload folder (nothing is
            moved then).
    """
    _check_device_map(model, device_map)
    device_map = dict(device_map)
    require_offload_folder(
        device_map, offload_dir if offload_dir is not None else offload_index, "offload_dir"
    )
    if main_device is not None:
        fix = "Pass a device that runs code here, or leave main_device=None (first GPU of the map)."
        if isinstance(main_device, str) and main_device in ("disk", "meta"):
            raise DeviceMapError(
                f"main_device runs the offloaded layers, so it must compute; got {main_device!r}. "
                f"{fix}"
            )
        check_device(main_device, "main_device", fix)
    devices = set(device_map.values())
    if devices == {"disk"}:
        force_hooks = True
    if len(devices) > 1 or force_hooks:
        if main_device is None:
            if devices <= {"cpu", "disk"}:
                main_device = "cpu"
            else:
                main_device = next(d for d in device_map.values() if d not in ("cpu", "disk"))
        offloaded_kinds = ("disk",) if str(main_device) in ("cpu", "mps") else ("cpu", "disk")
        cpu_modules = [n for n, d in device_map.items() if d == "cpu"]
        if "cpu" in offloaded_kinds and state_dict is None and cpu_modules:
            state_dict = extract_submodules_state_dict(model.state_dict(), cpu_modules)
        disk_modules = [n for n, d in device_map.items() if d == "disk"]
        if disk_modules and offload_index is None:
            # require_offload_folder above: disk modules and no index mean a folder was given.
            folder = cast(PathLike, offload_dir)
            _ensure_offloaded(model, disk_modules, folder, offload_buffers)
        execution_device = {
            name: main_device if device in ("cpu", "disk") else device
            for name, device in device_map.items()
        }
        execution_device[""] = main_device
        offload = {name: device in offloaded_kinds for name, device in device_map.items()}
        save_folder = offload_dir if disk_modules else None
        weights_map = None
        if state_dict is not None or save_folder is not None or offload_index is not None:
            weights_map = OffloadedWeightsLoader(
                state_dict=state_dict,
                save_folder=save_folder,
                index=offload_index,
                device=main_device if offload_index is not None else None,
            )
        tied_params = find_tied_parameters(model)
        tied_params_map: dict[int, dict[Any, torch.Tensor]] = {}
        for group in tied_params:
            for name in group:
                param = model.get_parameter(name)
                if param.device.type != "meta":
                    tied_params_map[param.data_ptr()] = {}
        attach_align_device_hook_on_blocks(
            model,
            execution_device=execution_device,
            offload=offload,
            offload_buffers=offload_buffers,
            weights_map=weights_map,
            skip_keys=skip_keys,
            preload_module_classes=preload_module_classes,
            tied_params_map=tied_params_map,
        )
        attach_prefetcher(model)
        retie_parameters(model, tied_params)
        _guard_moves(model)
        placed = sorted({str(d) for d in devices})
        logger.info(
            "Dispatched %d module groups over %s (execution on %s)",
            len(device_map),
            ", ".join(placed),
            main_device,
        )
    else:
        device = next(iter(devices))
        if isinstance(device, int) and not isinstance(device, bool):
            from ..placement._tensors import normalize_device

            device = normalize_device(device)
        model.to(device)
    # torch types a module attribute as ``Tensor | Module``; the map is plain Python state.
    model.hf_device_map = dict(device_map)  # type: ignore[assignment]
    return model


def load_checkpoint_and_dispatch(
    model: nn.Module,
    checkpoint: PathLike,
    device_map: Union[str, Mapping[str, Any], None] = None,
    max_memory: Mapping[Any, Any] | None = None,
    no_split_module_classes: list[str] | None = None,
    offload_folder: PathLike | None = None,
    offload_buffers: bool = False,
    dtype: Union[str, torch.dtype, None] = None,
    offload_state_dict: bool | None = None,
    skip_keys: Union[str, list[str], None] = None,
    preload_module_classes: list[str] | None = None,
    force_hooks: bool = False,
    strict: bool = False,
    full_state_dict: bool = True,
    broadcast_from_rank0: bool = False,
    *,
    show_progress: bool | None = None,
    mmap: bool = True,
) -> nn.Module:
    """Loads a (possibly sharded) checkpoint into a model and dispatches it over devices.

    Args:
        model: The model (typically built under [`init_empty_weights`][accel_bigmodel.init_empty_weights]).
        checkpoint: A weight file, an index ``.json``, or a folder with one index or one
            ``model.safetensors`` / ``pytorch_model.bin``.
        device_map: A dict, or ``"auto"`` / ``"balanced"`` / ``"balanced_low_0"`` /
            ``"sequential"`` to compute one. ``None`` loads without dispatching.
        max_memory: Device -> budget for the computed map (measured when ``None``).
        no_split_module_classes: Class names never split across devices.
        offload_folder: Folder for weights sent to disk.
        offload_buffers: Offload buffers of offloaded modules too.
        dtype: Cast floating-point weights to this dtype.
        offload_state_dict: Accepted for compatibility (loading never holds a state dict).
        skip_keys: Keyword arguments never moved between devices.
        preload_module_classes: Classes that load all their submodules' weights at once.
        force_hooks: Add hooks even when everything is on one device.
        strict: Raise if checkpoint and model keys differ.
        full_state_dict: Accepted for compatibility.
        broadcast_from_rank0: Not supported (see [`load_checkpoint_in_model`][accel_bigmodel.load_checkpoint_in_model]).
        show_progress: Draw a progress bar (default: only on a terminal).
        mmap: Keep CPU weights as memory-mapped views of safetensors files when no cast is
            needed (see [`load_checkpoint_in_model`][accel_bigmodel.load_checkpoint_in_model]); ``False`` copies them into RAM.

    Returns:
        The loaded (and, with a device map, dispatched) model.

    Example:
        >>> with init_empty_weights():
        ...     model = MyModel(config)
        >>> model = load_checkpoint_and_dispatch(
        ...     model, "checkpoint/", device_map="auto", no_split_module_classes=["Block"]
        ... )
    """
    resolved = resolve_device_map(
        model, device_map, max_memory, no_split_module_classes, dtype, offload_buffers
    )
    if resolved is not None:
        require_offload_folder(resolved, offload_folder, "offload_folder")
    load_checkpoint_in_model(
        model,
        checkpoint,
        device_map=resolved,
        offload_folder=offload_folder,
        dtype=dtype,
        offload_state_dict=bool(offload_state_dict),
        offload_buffers=offload_buffers,
        strict=strict,
        full_state_dict=full_state_dict,
        broadcast_from_rank0=broadcast_from_rank0,
        show_progress=show_progress,
        mmap=mmap,
    )
    if resolved is None:
        return model
    return dispatch_model(
        model,
        device_map=resolved,
        offload_dir=offload_folder,
        offload_buffers=offload_buffers,
        skip_keys=skip_keys,
        preload_module_classes=preload_module_classes,
        force_hooks=force_hooks,
    )


def _default_execution_device(model: nn.Module) -> Any:
    for param in model.parameters():
        if param.device.type != "meta":
            return param.device
    return torch.device("cpu")


def cpu_offload(
    model: nn.Module,
    execution_device: Device | None = None,
    offload_buffers: bool = False,
    state_dict: Mapping[str, torch.Tensor] | None = None,
    preload_module_classes: list[str] | None = None,
) -> nn.Module:
    """Keeps all weights on the CPU and loads each module's weights on the execution device
    only during its forward.

    Args:
        model: The model to offload.
        execution_device: Device the forwards run on (default: the model's device).
        offload_buffers: Offload buffers too.
        state_dict: The CPU weights (default: a CPU copy of the model's state dict).
        preload_module_classes: Classes that load all their submodules' weights at once.

    Returns:
        The hooked model.
    """
    if execution_device is None:
        execution_device = _default_execution_device(model)
    if state_dict is None:
        state_dict = {n: p.to("cpu") for n, p in model.state_dict().items()}
    add_hook_to_module(model, AlignDevicesHook(io_same_device=True), append=True)
    attach_align_device_hook(
        model,
        execution_device=execution_device,
        offload=True,
        offload_buffers=offload_buffers,
        weights_map=state_dict,
        preload_module_classes=preload_module_classes,
    )
    attach_prefetcher(model)
    return model


def cpu_offload_with_hook(
    model: nn.Module,
    execution_device: Device | None = None,
    prev_module_hook: UserCpuOffloadHook | None = None,
) -> tuple[nn.Module, UserCpuOffloadHook]:
    """Offloads a whole model to the CPU; it moves to the execution device when called and
    stays there until ``hook.offload()`` (or the next chained model's forward) is called.

    Args:
        model: The model to offload.
        execution_device: Device the forward runs on (default: first accelerator, else CPU).
        prev_module_hook: The hook of the model that runs before this one in a pipeline.

    Returns:
        ``(model, hook)``.
    """
    hook = CpuOffload(execution_device=execution_device, prev_module_hook=prev_module_hook)
    add_hook_to_module(model, hook, append=True)
    return model, UserCpuOffloadHook(model, hook)


def disk_offload(
    model: nn.Module,
    offload_dir: PathLike,
    execution_device: Device | None = None,
    offload_buffers: bool = False,
    preload_module_classes: list[str] | None = None,
) -> nn.Module:
    """Writes the weights to ``offload_dir`` (as memory-mapped safetensors, unless an index is
    already there) and loads each module's weights only during its forward.

    Args:
        model: The model to offload.
        offload_dir: Folder for the weights and ``index.json``.
        execution_device: Device the forwards run on (default: the model's device).
        offload_buffers: Offload buffers too.
        preload_module_classes: Classes that load all their submodules' weights at once.

    Returns:
        The hooked model.
    """
    if not read_offload_index(offload_dir):
        state = model.state_dict()
        entries = write_offload_file(offload_dir, "model-offload.safetensors", list(state.items()))
        save_offload_index(entries, offload_dir)
    if execution_device is None:
        execution_device = _default_execution_device(model)
    weights_map = OffloadedWeightsLoader(save_folder=offload_dir)
    add_hook_to_module(model, AlignDevicesHook(io_same_device=True), append=True)
    attach_align_device_hook(
        model,
        execution_device=execution_device,
        offload=True,
        offload_buffers=offload_buffers,
        weights_map=weights_map,
        preload_module_classes=preload_module_classes,
    )
    attach_prefetcher(model)
    return model

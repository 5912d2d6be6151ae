"""``load_and_quantize_model``: stream a checkpoint into bitsandbytes layers, then dispatch."""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any, Union

import torch
from accel_bigmodel import (
    OffloadedWeightsLoader,
    dispatch_model,
    get_balanced_memory,
    infer_auto_device_map,
    load_checkpoint_in_model,
    mapped_device,
    offload_weight,
    save_offload_index,
    set_module_tensor_to_device,
)

from ._bnb_config import BnbQuantizationConfig
from ._bnb_layers import (
    PendingQuantization,
    _layer_classes,
    _name_in,
    get_keys_to_not_convert,
    replace_with_bnb_layers,
)
from ._optional_backends import require_bnb

logger = logging.getLogger("accel_precision.bnb")

PathLike = Union[str, "os.PathLike[str]"]
_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")


def _offloaded_devices(device_map: Mapping[str, Any]) -> set[str]:
    """Devices whose modules are offloaded: disk always, the CPU when an accelerator runs."""
    has_accelerator = any(d not in ("cpu", "disk", "meta") for d in device_map.values())
    return {"disk", "cpu"} if has_accelerator else {"disk"}


def get_quantized_model_device_map(
    model: torch.nn.Module,
    bnb_quantization_config: BnbQuantizationConfig,
    device_map: Union[str, Mapping[str, Any], None] = None,
    max_memory: Mapping[Any, Any] | None = None,
    no_split_module_classes: list[str] | None = None,
) -> dict[str, Any] | None:
    """The device map of a model whose linear layers are (about to be) quantized.

    A strategy name (``"auto"``, ``"balanced"``, ``"balanced_low_0"``, ``"sequential"``) is
    computed with the quantized sizes: 1 byte per weight for 8-bit, half a byte for 4-bit,
    ``torch_dtype`` for the rest and float32 for ``keep_in_fp32_modules``.

    Args:
        model: The model after [`replace_with_bnb_layers`][accel_precision.replace_with_bnb_layers] (meta tensors are fine).
        bnb_quantization_config: The quantization settings.
        device_map: A dict, a device, a strategy name, or None (no dispatch).
        max_memory: Device -> budget for computed maps.
        no_split_module_classes: Class names never split across devices.

    Returns:
        The device map, or None when ``device_map`` is None.
    """
    if device_map is None:
        return None
    if isinstance(device_map, Mapping):
        return dict(device_map)
    if not (isinstance(device_map, str) and device_map in _STRATEGIES):
        return {"": device_map}
    bnb = require_bnb()
    config = bnb_quantization_config
    special: dict[str, Any] = {}
    for name, module in model.named_modules():
        if isinstance(module, (bnb.nn.Linear8bitLt, bnb.nn.Linear4bit)):
            special[f"{name}.weight"] = config.target_dtype
    for name, _ in model.named_parameters():
        if config.keep_in_fp32_modules and _name_in(
            name.rsplit(".", 1)[0], config.keep_in_fp32_modules
        ):
            special[name] = torch.float32
    if device_map != "sequential":
        max_memory = get_balanced_memory(
            model,
            max_memory=max_memory,
            no_split_module_classes=no_split_module_classes,
            dtype=config.torch_dtype,
            special_dtypes=special,
            low_zero=device_map == "balanced_low_0",
        )
    return infer_auto_device_map(
        model,
        max_memory=max_memory,
        no_split_module_classes=no_split_module_classes,
        dtype=config.torch_dtype,
        special_dtypes=special,
    )


def load_and_quantize_model(
    model: torch.nn.Module,
    bnb_quantization_config: BnbQuantizationConfig,
    weights_location: PathLike | None = None,
    device_map: Union[str, Mapping[str, Any], None] = None,
    no_split_module_classes: list[str] | None = None,
    max_memory: Mapping[Any, Any] | None = None,
    offload_folder: PathLike | None = None,
    offload_state_dict: bool = False,
) -> torch.nn.Module:
    """Quantize a model's linear layers with bitsandbytes, loading and dispatching its weights.

    For a model on the meta device (built under ``init_empty_weights``), linear layers are
    replaced by bitsandbytes layers whose weights are quantized one by one as accel-bigmodel's
    loader streams them from ``weights_location``: the full-precision model never exists in
    memory. The model is then dispatched per ``device_map``. 8-bit layers sent to the disk are
    stored there already quantized (int8, a quarter of their float32 size) and their row scales
    stay in memory; 4-bit layers cannot be offloaded (bitsandbytes keeps their quantization
    state in Python objects), so modules mapped to offload are kept unquantized in 4-bit mode.

    A model with real weights is quantized in place from them (``weights_location`` unused).

    Args:
        model: The model, on the meta device or already loaded.
        bnb_quantization_config: 8-bit or 4-bit settings.
        weights_location: A checkpoint file, index ``.json`` or folder (sharded or not).
        device_map: A dict, a device, ``"auto"``/``"balanced"``/``"balanced_low_0"``/
            ``"sequential"``, or None to keep every weight on the CPU without hooks.
        no_split_module_classes: Class names never split across devices.
        max_memory: Device -> budget for computed device maps.
        offload_folder: Folder for the weights of modules mapped to ``"disk"``.
        offload_state_dict: Accepted for compatibility; loading never holds a state dict.

    Returns:
        The quantized model (``model.is_loaded_in_8bit`` / ``is_loaded_in_4bit`` set).

    Raises:
        ImportError: bitsandbytes is not installed (the message has the install command).
        ValueError: No ``weights_location`` for a meta model, disk modules without
            ``offload_folder``, or 4-bit layers placed on an offloaded device by a computed map.
    """
    require_bnb("load_and_quantize_model")
    config = bnb_quantization_config
    skip = list(config.skip_modules) if config.skip_modules is not None else None
    if skip is None:
        skip = get_keys_to_not_convert(model)
    keep_fp32 = list(config.keep_in_fp32_modules or [])
    offloaded: list[str] = []
    if isinstance(device_map, Mapping):
        kinds = _offloaded_devices(device_map)
        offloaded = [k for k, v in device_map.items() if v in kinds]
    if config.load_in_4bit:
        skip.extend(offloaded)
    not_converted = skip + keep_fp32
    object.__setattr__(model, "is_loaded_in_8bit", config.load_in_8bit)
    object.__setattr__(model, "is_loaded_in_4bit", config.load_in_4bit)

    on_meta = any(t.device.type == "meta" for t in model.parameters())
    if not on_meta:
        logger.warning(
            "Quantizing a model whose weights are already loaded; build it under "
            "init_empty_weights() and pass weights_location to never hold it in full precision."
        )
        replace_with_bnb_layers(model, config, modules_to_not_convert=not_converted)
        _cast_unquantized(model, config.torch_dtype, keep_fp32)  # type: ignore[arg-type]
        resolved = get_quantized_model_device_map(
            model, config, device_map, max_memory, no_split_module_classes
        )
        if resolved is not None:
            return dispatch_model(model, device_map=resolved, offload_dir=offload_folder)
        return model

    if weights_location is None:
        raise ValueError(
            "A model on the meta device gets its weights from a checkpoint; got "
            "weights_location=None. Pass the checkpoint file or folder as weights_location."
        )
    replace_with_bnb_layers(model, config, modules_to_not_convert=not_converted)
    resolved = get_quantized_model_device_map(
        model, config, device_map, max_memory, no_split_module_classes
    )
    if resolved is not None:
        _check_placement(model, config, resolved, offload_folder)
    load_checkpoint_in_model(
        model,
        weights_location,
        device_map=resolved,
        offload_folder=offload_folder,
        dtype=config.torch_dtype,
        offload_state_dict=offload_state_dict,
        keep_in_fp32_modules=keep_fp32,
    )
    _own_unquantized_tensors(model)
    if resolved is None:
        return model
    if config.load_in_8bit:
        _quantize_offloaded_8bit(model, resolved, offload_folder)
    return dispatch_model(model, device_map=resolved, offload_dir=offload_folder)


def _own_unquantized_tensors(model: torch.nn.Module) -> None:
    """Copy the CPU tensors that stayed full precision into private memory.

    The loader keeps such tensors as views of the memory-mapped checkpoint files; every page of
    those files was read to quantize the other weights, and a mapping stays resident as long as
    one view of it lives. Owning the few unquantized tensors (embeddings, norms, head) lets the
    mappings close, so the process holds the quantized model and nothing more.
    """
    owned: dict[int, torch.Tensor] = {}  # shared (tied) tensors are copied once
    for module in model.modules():
        for table in (module._parameters, module._buffers):
            for name, tensor in table.items():
                if tensor is None or tensor.device.type != "cpu":
                    continue
                if isinstance(tensor, PendingQuantization) or (
                    name == "weight" and tensor.dtype in (torch.int8, torch.uint8)
                ):
                    continue
                if id(tensor) not in owned:
                    copy = tensor.detach().clone()
                    if isinstance(tensor, torch.nn.Parameter):
                        copy = torch.nn.Parameter(copy, requires_grad=tensor.requires_grad)
                    owned[id(tensor)] = copy
                table[name] = owned[id(tensor)]  # type: ignore[assignment]


def _cast_unquantized(model: torch.nn.Module, dtype: torch.dtype, keep_fp32: list[str]) -> None:
    for name, module in model.named_modules():
        target = torch.float32 if keep_fp32 and _name_in(name, keep_fp32) else dtype
        for param_name, param in list(module.named_parameters(recurse=False)):
            if param.is_floating_point() and param.dtype != target:
                module._parameters[param_name] = torch.nn.Parameter(
                    param.detach().to(target), requires_grad=param.requires_grad
                )


def _check_placement(
    model: torch.nn.Module,
    config: BnbQuantizationConfig,
    device_map: Mapping[str, Any],
    offload_folder: PathLike | None,
) -> None:
    if "disk" in device_map.values() and offload_folder is None:
        disk = [k for k, v in device_map.items() if v == "disk"]
        raise ValueError(
            f"Modules mapped to 'disk' need an offload folder; {disk[:5]} go to disk but "
            "offload_folder is None. Pass offload_folder='some/folder' or raise max_memory."
        )
    if not config.load_in_4bit:
        return
    kinds = _offloaded_devices(device_map)
    bnb = require_bnb()
    bad = [
        name
        for name, module in model.named_modules()
        if isinstance(module, bnb.nn.Linear4bit) and mapped_device(device_map, name) in kinds
    ]
    if bad:
        raise ValueError(
            "4-bit layers cannot be offloaded (their quantization state does not go through "
            f"offload hooks); the device map offloads {bad[:5]} ({len(bad)} layers). Pass a "
            "device_map dict that maps them to 'cpu'/'disk' explicitly (they then stay "
            "unquantized), give more max_memory, or use load_in_8bit=True."
        )


def _quantize_offloaded_8bit(
    model: torch.nn.Module, device_map: Mapping[str, Any], offload_folder: PathLike | None
) -> None:
    """Replace the full-precision disk copies of offloaded 8-bit weights by int8 ones.

    The checkpoint loader leaves weights of disk modules on disk as they are in the checkpoint;
    each 8-bit one is read once (memory-mapped), quantized, written back to the offload folder as
    int8 and its index entry updated. The row scales stay in memory on the module.
    """
    if offload_folder is None or "disk" not in device_map.values():
        return
    bnb = require_bnb()
    layer8, _ = _layer_classes()
    targets: list[tuple[str, Any]] = [
        (name, module)
        for name, module in model.named_modules()
        if isinstance(module, layer8) and mapped_device(device_map, name) == "disk"
    ]
    if not targets:
        return
    loader = OffloadedWeightsLoader(save_folder=offload_folder)
    index: dict[str, Any] = {}
    for name, module in targets:
        key = f"{name}.weight"
        if key not in loader:
            continue
        values, scales, _ = bnb.functional.int8_vectorwise_quant(
            loader[key].to(torch.float16).contiguous()
        )
        offload_weight(values, key, offload_folder, index=index)
        module._buffers["SCB"] = scales.float()
        module._parameters["weight"] = bnb.nn.Int8Params(
            torch.empty(values.shape, dtype=torch.int8, device="meta"),
            requires_grad=False,
            has_fp16_weights=False,
        )
    save_offload_index(index, offload_folder)
    logger.info("Stored %d offloaded 8-bit weights as int8 in %s", len(index), offload_folder)


def quantize_and_offload_8bit(
    model: torch.nn.Module,
    param: torch.Tensor,
    param_name: str,
    new_dtype: torch.dtype,
    offload_folder: PathLike,
    offload_index: dict[str, Any],
    fp16_statistics: torch.Tensor | None,
) -> None:
    """Offload one 8-bit weight to disk in its int8 form, with its row scales, and leave the
    parameter on the meta device.

    Without ``fp16_statistics``, ``param`` (full precision) is quantized row by row
    (bitsandbytes' ``int8_vectorwise_quant``, which runs on the CPU); with them, ``param`` is
    already int8 and ``fp16_statistics`` are its scales. The values are written as
    ``param_name`` and the scales as ``param_name`` with ``weight`` replaced by ``SCB``, both
    recorded in ``offload_index``.

    Args:
        model: The model owning the weight.
        param: The weight's value.
        param_name: Its full name in ``model`` (``"layers.0.fc.weight"``).
        new_dtype: Dtype of the meta parameter left in the model.
        offload_folder: Folder of the offloaded ``.dat`` files.
        offload_index: The offload index, updated in place.
        fp16_statistics: Row scales of an already quantized ``param``, or None.

    Raises:
        ValueError: for an int8 ``param`` without its ``fp16_statistics``.
    """
    if fp16_statistics is None:
        if param.dtype == torch.int8:
            raise ValueError(
                f"quantize_and_offload_8bit quantizes a full-precision weight unless given its "
                f"row scales; got an int8 {param_name!r} with fp16_statistics=None. Pass the "
                "scales the weight was quantized with (its SCB) as fp16_statistics."
            )
        bnb = require_bnb()
        param, fp16_statistics, _ = bnb.functional.int8_vectorwise_quant(
            param.detach().to(torch.float16).contiguous()
        )
    offload_weight(param, param_name, offload_folder, index=offload_index)
    scales_name = param_name.replace("weight", "SCB")
    offload_weight(fp16_statistics, scales_name, offload_folder, index=offload_index)
    set_module_tensor_to_device(
        model, param_name, "meta", dtype=new_dtype, value=torch.empty(*param.size())
    )


def is_pending(param: torch.Tensor) -> bool:
    """Whether ``param`` is a quantized layer's weight still waiting for its value."""
    return isinstance(param, PendingQuantization)

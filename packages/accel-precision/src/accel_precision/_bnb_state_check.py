"""Checks of a 4-bit layer's stored quantization state against the tensors it describes.

bitsandbytes stores the small fields of a 4-bit weight's quantization state (the original
shape and dtype, the block size, the quantization type, the nested block size and offset) as a
JSON text packed into a ``uint8`` tensor beside the weight. It trusts that text when loading:
a file whose text was altered without changing its length (a shape ``[64, 32]`` made
``[32, 64]``, a block size ``64`` made ``32``) loads without a word and computes garbage, or
fails inside a kernel later. Here every field is checked against the layer and against the
byte counts of the tensors it describes, before anything of the layer changes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import torch

_QUANT_TYPES = ("nf4", "fp4")
_PACKED_PREFIX = "quant_state.bitsandbytes__"


class QuantStateMismatchError(ValueError):
    """A stored 4-bit quantization state does not describe the weight stored with it."""


def check_4bit_state(
    key: str, weight: torch.Tensor, stats: Mapping[str, Any], out_features: int, in_features: int
) -> None:
    """Refuse the quantization state ``stats`` of the packed 4-bit ``weight`` stored at ``key``
    unless its fields agree with the layer (``out_features`` x ``in_features``) and with the
    sizes of the weight, its block scales and their nested scales.

    Raises:
        QuantStateMismatchError: naming the key, the field, its value and what it must be.
    """
    packed = [name for name in stats if name.startswith(_PACKED_PREFIX)]
    if len(packed) != 1:
        return  # an unpacked state (no JSON): bitsandbytes checks its own tensors
    suffix = packed[0][len(_PACKED_PREFIX) :]
    fields = _unpack(key, packed[0], stats[packed[0]])

    def refuse(field: str, value: Any, rule: str) -> QuantStateMismatchError:
        return QuantStateMismatchError(
            f"{key}.{packed[0]}: field {field!r} is {value!r}, but {rule}. The stored quantization "
            "state does not describe the weight stored with it (the file was altered or mixed "
            "from two models): load the file the layer was saved to, or quantize the "
            "full-precision weights again with load_and_quantize_model. Nothing was loaded."
        )

    quant_type = fields.get("quant_type")
    if quant_type not in _QUANT_TYPES or quant_type != suffix:
        raise refuse("quant_type", quant_type, f"it must be {suffix!r}, as its key says")
    for field in ("dtype", "nested_dtype"):
        if field in fields or field == "dtype":
            name = fields.get(field)
            dtype = getattr(torch, name, None) if isinstance(name, str) else None
            if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
                raise refuse(field, name, "it must name a floating-point torch dtype")
    shape = fields.get("shape")
    if not isinstance(shape, list) or shape != [out_features, in_features]:
        raise refuse("shape", shape, f"the layer's weight is [{out_features}, {in_features}]")
    count = out_features * in_features
    if weight.numel() * weight.element_size() != (count + 1) // 2:
        raise refuse(
            "shape",
            shape,
            f"the packed weight holds {weight.numel() * weight.element_size()} bytes, and "
            f"{count} values take {(count + 1) // 2}",
        )
    absmax = stats.get("absmax")
    blocksize = fields.get("blocksize")
    _check_blocks("blocksize", blocksize, count, absmax, "absmax", refuse)
    if "nested_absmax" in stats or "nested_blocksize" in fields:
        scales = absmax.numel() if isinstance(absmax, torch.Tensor) else 0
        nested = fields.get("nested_blocksize")
        _check_blocks(
            "nested_blocksize", nested, scales, stats.get("nested_absmax"), "nested_absmax", refuse
        )
        offset = fields.get("nested_offset")
        if isinstance(offset, bool) or not isinstance(offset, (int, float)):
            raise refuse("nested_offset", offset, "it must be a number")


def _unpack(key: str, name: str, tensor: Any) -> dict[str, Any]:
    try:
        if not isinstance(tensor, torch.Tensor) or tensor.dtype != torch.uint8:
            raise ValueError("not a uint8 tensor")
        fields = json.loads(bytes(tensor.detach().cpu().numpy()).decode("utf-8"))
        if not isinstance(fields, dict):
            raise ValueError("not a JSON object")
    except (ValueError, UnicodeDecodeError) as exc:
        raise QuantStateMismatchError(
            f"{key}.{name} must hold the JSON text bitsandbytes packs a 4-bit quantization "
            f"state into; it does not ({exc}). The file was altered: load the file the layer "
            "was saved to. Nothing was loaded."
        ) from None
    return fields


def _check_blocks(
    field: str, blocksize: Any, count: int, scales: Any, scales_name: str, refuse: Any
) -> None:
    """``blocksize`` is a power of two from 32 and ``scales`` holds one value per block."""
    if (
        isinstance(blocksize, bool)
        or not isinstance(blocksize, int)
        or blocksize < 32
        or blocksize & (blocksize - 1)
    ):
        raise refuse(field, blocksize, "it must be a power of two from 32 (64 by default)")
    held = scales.numel() if isinstance(scales, torch.Tensor) else None
    if held != math.ceil(count / blocksize):
        raise refuse(
            field,
            blocksize,
            f"{count} values in blocks of {blocksize} need {math.ceil(count / blocksize)} "
            f"scales, and {scales_name} holds {held}",
        )

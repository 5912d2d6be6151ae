"""``BnbQuantizationConfig``: how bitsandbytes quantizes a model's linear layers."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Union

import torch

_DTYPE_NAMES = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}
_QUANT_TYPES = ("fp4", "nf4")


def _parse_dtype(name: str, value: Union[str, torch.dtype]) -> torch.dtype:
    if isinstance(value, torch.dtype):
        if not value.is_floating_point:
            raise ValueError(
                f"{name} must be a floating-point dtype; got {value}. Use torch.float32, "
                "torch.float16 or torch.bfloat16."
            )
        return value
    if isinstance(value, str) and value in _DTYPE_NAMES:
        return _DTYPE_NAMES[value]
    raise ValueError(
        f"{name} must be one of {list(_DTYPE_NAMES)} or a torch.dtype; got {value!r}. "
        "Pass e.g. 'bf16' or torch.bfloat16."
    )


def _check_names(name: str, value: Any) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise ValueError(
            f"{name} must be a list of module names; got {value!r}. Pass e.g. ['lm_head']."
        )
    return list(value)


@dataclass
class BnbQuantizationConfig:
    """A plugin to enable bitsandbytes 8-bit (LLM.int8()) or 4-bit (FP4 / NF4) quantization.

    Exactly one of ``load_in_8bit`` and ``load_in_4bit`` must be True. String dtypes
    (``"fp32"``, ``"fp16"``, ``"bf16"``) become ``torch.dtype`` values.
    """

    load_in_8bit: bool = False
    """Quantize linear layers to int8 with LLM.int8()."""
    llm_int8_threshold: float = 6.0
    """Activation magnitude above which a feature column is computed in 16-bit (8-bit only)."""
    load_in_4bit: bool = False
    """Quantize linear layers to 4 bits."""
    bnb_4bit_quant_type: str = "fp4"
    """4-bit data type: ``"fp4"`` or ``"nf4"``."""
    bnb_4bit_use_double_quant: bool = False
    """Quantize the 4-bit block scales too (saves about 0.4 bit per weight)."""
    bnb_4bit_compute_dtype: Union[str, torch.dtype] = "fp16"
    """dtype 4-bit layers compute in (``"fp32"``, ``"fp16"``, ``"bf16"`` or a dtype)."""
    torch_dtype: Union[str, torch.dtype, None] = None
    """dtype of the weights that stay unquantized (skipped modules, biases, norms). None means
    float16 for 8-bit and ``bnb_4bit_compute_dtype`` for 4-bit."""
    skip_modules: list[str] | None = None
    """Modules not to quantize. None means the output head (and weights tied to it), found by
    [`get_keys_to_not_convert`][accel_precision.get_keys_to_not_convert]."""
    keep_in_fp32_modules: list[str] | None = None
    """Modules neither quantized nor cast: their weights stay in float32."""

    def __post_init__(self) -> None:
        for name in ("load_in_8bit", "load_in_4bit", "bnb_4bit_use_double_quant"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(
                    f"{name} must be a bool; got {getattr(self, name)!r}. Pass True or False."
                )
        if self.load_in_8bit and self.load_in_4bit:
            raise ValueError(
                "A model is quantized to 8 bits or to 4 bits, not both; got load_in_8bit=True and "
                "load_in_4bit=True. Set only one of them."
            )
        if not self.load_in_8bit and not self.load_in_4bit:
            raise ValueError(
                "BnbQuantizationConfig needs a quantization; got load_in_8bit=False and "
                "load_in_4bit=False. Set load_in_8bit=True or load_in_4bit=True."
            )
        if isinstance(self.llm_int8_threshold, bool) or not isinstance(
            self.llm_int8_threshold, (int, float)
        ):
            raise ValueError(
                f"llm_int8_threshold must be a number; got {self.llm_int8_threshold!r}. "
                "The usual value is 6.0."
            )
        if self.bnb_4bit_quant_type not in _QUANT_TYPES:
            raise ValueError(
                f"bnb_4bit_quant_type must be one of {list(_QUANT_TYPES)}; got "
                f"{self.bnb_4bit_quant_type!r}. Use 'nf4' (better for normally distributed "
                "weights) or 'fp4'."
            )
        self.bnb_4bit_compute_dtype = _parse_dtype(
            "bnb_4bit_compute_dtype", self.bnb_4bit_compute_dtype
        )
        if self.torch_dtype is None:
            self.torch_dtype = torch.float16 if self.load_in_8bit else self.bnb_4bit_compute_dtype
        else:
            self.torch_dtype = _parse_dtype("torch_dtype", self.torch_dtype)
        self.skip_modules = _check_names("skip_modules", self.skip_modules)
        self.keep_in_fp32_modules = _check_names("keep_in_fp32_modules", self.keep_in_fp32_modules)

    @property
    def target_dtype(self) -> Union[torch.dtype, str]:
        """``torch.int8`` for 8-bit, ``"int4"`` for 4-bit (the storage size of a weight)."""
        return torch.int8 if self.load_in_8bit else "int4"

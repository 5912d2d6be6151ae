"""bitsandbytes layers: which linear layers to quantize, the quantized layer classes, and a
placeholder weight that becomes a quantized weight the moment a value is placed into it."""

from __future__ import annotations

import copy
import functools
import weakref
from dataclasses import dataclass
from typing import Any

import torch
from accel_bigmodel import find_tied_parameters

from ._bnb_config import BnbQuantizationConfig
from ._bnb_state_check import check_4bit_state
from ._optional_backends import require_bnb


@dataclass
class _QuantSpec:
    """How the weight of one layer is quantized when its value arrives."""

    bits: int
    module: Any  # weakref to the owning layer
    quant_type: str = "nf4"
    compress_statistics: bool = False
    blocksize: int = 64

    def quantize(self, data: torch.Tensor) -> torch.nn.Parameter:
        bnb = require_bnb()
        module = self.module()
        if self.bits == 8:
            if data.dtype == torch.int8:  # already quantized (offloaded int8 weight coming back)
                values = data
            else:
                values, scales, _ = bnb.functional.int8_vectorwise_quant(
                    data.to(torch.float16).contiguous()
                )
                if module is not None:
                    module.SCB = scales.float()
            return bnb.nn.Int8Params(values, requires_grad=False, has_fp16_weights=False)
        packed, state = bnb.functional.quantize_4bit(
            data.contiguous(),
            blocksize=self.blocksize,
            compress_statistics=self.compress_statistics,
            quant_type=self.quant_type,
        )
        param = bnb.nn.Params4bit(
            packed,
            requires_grad=False,
            quant_state=state,
            blocksize=self.blocksize,
            compress_statistics=self.compress_statistics,
            quant_type=self.quant_type,
            bnb_quantized=True,
        )
        if module is not None:
            module.quant_state = state
        return param


class PendingQuantization(torch.nn.Parameter):
    """The weight of a quantized layer before its value is loaded.

    It lives on the meta device. Placing a value into it (``set_module_tensor_to_device`` of
    accel-bigmodel rebuilds a parameter with its class) returns the quantized bitsandbytes weight
    instead, so each weight is quantized as it is read and no full-precision copy of the model
    ever exists.
    """

    _accel_quant: _QuantSpec | None

    def __new__(
        cls,
        data: torch.Tensor | None = None,
        requires_grad: bool = False,
        _accel_quant: _QuantSpec | None = None,
        **_: Any,
    ) -> Any:
        if data is None:
            data = torch.empty(0, device="meta")
        if data.device.type != "meta" and _accel_quant is not None:
            return _accel_quant.quantize(data)
        obj = torch.Tensor._make_subclass(cls, data, False)
        obj._accel_quant = _accel_quant
        return obj

    def __repr__(self, *args: Any, **kwargs: Any) -> str:  # type: ignore[override]
        bits = self._accel_quant.bits if self._accel_quant is not None else "?"
        return f"PendingQuantization({bits}-bit, shape={tuple(self.shape)}, dtype={self.dtype})"


@functools.cache
def _layer_classes() -> tuple[type, type]:
    bnb = require_bnb()

    class Linear8bit(bnb.nn.Linear8bitLt):  # type: ignore[name-defined]
        """``Linear8bitLt`` whose row scales are a buffer, so that they follow the int8 weight
        through device hooks and state dicts."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self.register_buffer(
                "SCB", torch.empty(self.out_features, device=self.weight.device), persistent=False
            )

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            state = self.state
            state.is_training = self.training
            state.CB, state.SCB = self.weight.data, self.SCB
            bias: Any = self.bias
            if bias is not None and bias.dtype != x.dtype:
                bias = bias.to(x.dtype)
            try:
                return bnb.matmul(x, self.weight, bias=bias, state=state)
            finally:
                state.CB = state.SCB = None  # the module's tensors stay the only references

        def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
            torch.nn.Module._save_to_state_dict(self, destination, prefix, keep_vars)
            if self.SCB.device.type != "meta" and self.weight.dtype == torch.int8:
                destination[prefix + "SCB"] = self.SCB if keep_vars else self.SCB.detach()
                destination[prefix + "weight_format"] = torch.tensor(0, dtype=torch.uint8)

        def _load_from_state_dict(
            self,
            state_dict: Any,
            prefix: str,
            local_metadata: Any,
            strict: bool,
            missing_keys: list[str],
            unexpected_keys: list[str],
            error_msgs: list[str],
        ) -> None:
            state_dict.pop(prefix + "weight_format", None)
            weight, scales = state_dict.get(prefix + "weight"), state_dict.get(prefix + "SCB")
            if weight is None or weight.dtype != torch.int8 or scales is None:
                error_msgs.append(
                    f"{prefix}weight: a quantized 8-bit layer loads an int8 weight and its SCB "
                    f"scales; got {None if weight is None else weight.dtype} and "
                    f"{'no' if scales is None else 'some'} scales. Load full-precision weights "
                    "with load_and_quantize_model instead."
                )
                return
            self.weight = bnb.nn.Int8Params(
                weight.detach().clone(), requires_grad=False, has_fp16_weights=False
            )
            self.SCB = scales.detach().float().clone()
            has_bias = self._parameters.get("bias") is not None
            if has_bias and prefix + "bias" in state_dict:
                self.bias = torch.nn.Parameter(
                    state_dict[prefix + "bias"].detach().clone(), requires_grad=False
                )
            elif has_bias:
                missing_keys.append(prefix + "bias")

    class Linear4bit(bnb.nn.Linear4bit):  # type: ignore[name-defined]
        """``Linear4bit`` that reloads its packed weight and quantization state from a state
        dict written by ``state_dict()``, and saves exactly what it loaded.

        On a CPU with AVX512-BF16, bitsandbytes repacks 4-bit weights for its fast CPU kernel at
        the first evaluation forward, turning the block scales into bfloat16 (and undoing their
        double quantization). Its own ``state_dict()`` then converts back, which is lossy for
        those scales (measured with bitsandbytes 0.50: logit error against float32 rose from
        0.16 to 0.38 on a small Llama after a save and a load). Here the forward keeps the fast
        kernel: the quantization state from before the repacking is kept aside (the scales, a
        few percent of the weight's bytes), ``state_dict()`` writes it with the weight's
        nibbles put back in their stored order (an exact permutation), and moving the layer
        puts the stored form back before it moves. Save, load and forward are bit-identical.
        """

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            if _about_to_repack(self, x):
                state = getattr(self.weight, "quant_state", None) or self.quant_state
                self._accel_stored_state = copy.copy(state)
            return super().forward(x)

        def _save_to_state_dict(self, destination: Any, prefix: str, keep_vars: bool) -> None:
            stored = _stored_form(self)
            if stored is None:
                super()._save_to_state_dict(destination, prefix, keep_vars)
                return
            weight, state = stored
            destination[prefix + "weight"] = weight
            if self.bias is not None:
                destination[prefix + "bias"] = self.bias if keep_vars else self.bias.detach()
            for key, value in state.as_dict(packed=True).items():
                destination[prefix + "weight." + key] = value if keep_vars else value.detach()

        def _apply(self, fn: Any, *args: Any, **kwargs: Any) -> Any:
            stored = _stored_form(self)
            if stored is not None:  # move the stored form, not the CPU kernel's layout
                self.weight.data, self.weight.quant_state = stored
                self.quant_state = stored[1]
                self._accel_stored_state = None
            return super()._apply(fn, *args, **kwargs)

        def _load_from_state_dict(
            self,
            state_dict: Any,
            prefix: str,
            local_metadata: Any,
            strict: bool,
            missing_keys: list[str],
            unexpected_keys: list[str],
            error_msgs: list[str],
        ) -> None:
            key = prefix + "weight"
            stats = {k[len(key) + 1 :]: v for k, v in state_dict.items() if k.startswith(key + ".")}
            weight = state_dict.get(key)
            if weight is None or not stats:
                error_msgs.append(
                    f"{key}: a quantized 4-bit layer loads a packed weight and its quant_state "
                    f"entries; got {'no weight' if weight is None else 'no quant_state'}. Load "
                    "full-precision weights with load_and_quantize_model instead."
                )
                return
            check_4bit_state(key, weight, stats, self.out_features, self.in_features)
            self.weight = bnb.nn.Params4bit.from_prequantized(
                weight.detach().clone(), stats, requires_grad=False, device=weight.device
            )
            self.quant_state = self.weight.quant_state
            has_bias = self._parameters.get("bias") is not None
            if has_bias and prefix + "bias" in state_dict:
                self.bias = torch.nn.Parameter(
                    state_dict[prefix + "bias"].detach().clone(), requires_grad=False
                )
            elif has_bias:
                missing_keys.append(prefix + "bias")

    Linear8bit.__qualname__ = Linear8bit.__name__ = "Linear8bitLt"
    Linear4bit.__qualname__ = Linear4bit.__name__ = "Linear4bit"
    return Linear8bit, Linear4bit


def _about_to_repack(layer: Any, x: torch.Tensor) -> bool:
    """Whether bitsandbytes' forward of ``layer`` is about to repack its weight for the CPU."""
    state = getattr(layer.weight, "quant_state", None) or getattr(layer, "quant_state", None)
    return bool(
        x.device.type == "cpu"
        and getattr(layer, "support_avx512bf16_for_cpu", False)
        and not layer.training
        and not x.requires_grad
        and state is not None
        and not getattr(state, "packing_format_for_cpu", False)
    )


def _stored_form(layer: Any) -> tuple[torch.Tensor, Any] | None:
    """``(weight, quant_state)`` of a layer repacked for the CPU kernel, as they were stored.

    ``None`` when the layer is not repacked (or was repacked outside its forward, with nothing
    kept aside): it saves as bitsandbytes does.
    """
    stored = getattr(layer, "_accel_stored_state", None)
    live = getattr(layer.weight, "quant_state", None)
    if stored is None or live is None or not getattr(live, "packing_format_for_cpu", False):
        return None
    from bitsandbytes.functional import _convert_weight_packed_for_cpu_inverse

    # The nibbles go back to their stored order exactly; the scales come from the state kept
    # aside (the inverse's own are bfloat16 copies, so its state is thrown away).
    weight, _ = _convert_weight_packed_for_cpu_inverse(layer.weight.data, copy.copy(live))
    return weight, stored


def _name_in(name: str, modules: list[str]) -> bool:
    """Whether module ``name`` is (inside) one of ``modules`` (dotted-path match)."""
    dotted = f".{name}."
    return any(f".{m}." in dotted or name == m for m in modules)


def get_keys_to_not_convert(model: torch.nn.Module) -> list[str]:
    """Modules to keep unquantized by default: the output head and what shares its weights.

    The head is ``model.get_output_embeddings()`` when the model has that method (transformers
    models), else the last direct child of the model.

    Args:
        model: The model (meta tensors are fine).

    Returns:
        Module names, e.g. ``["lm_head"]``.
    """
    names: list[str] = []
    head = None
    get_output = getattr(model, "get_output_embeddings", None)
    if callable(get_output):
        try:
            head = get_output()
        except (NotImplementedError, AttributeError):
            head = None
    if head is not None:
        names.extend(n for n, m in model.named_modules() if m is head)
    else:
        children = list(model.named_children())
        if children:
            names.append(children[-1][0])
    for group in find_tied_parameters(model):
        owners = {name.rsplit(".", 1)[0] for name in group if "." in name}
        if any(_name_in(o, names) for o in owners):
            names.extend(sorted(owners))
    return sorted(set(names))


def replace_with_bnb_layers(
    model: torch.nn.Module,
    bnb_quantization_config: BnbQuantizationConfig,
    modules_to_not_convert: list[str] | None = None,
    current_key_name: list[str] | None = None,
) -> torch.nn.Module:
    """Replace the ``nn.Linear`` layers of ``model`` by bitsandbytes layers, in place.

    On the meta device the new layers hold [`PendingQuantization`][accel_precision.PendingQuantization] weights (filled by
    loading a checkpoint). With real weights, each layer is quantized right away from them.

    Args:
        model: The model.
        bnb_quantization_config: 8-bit or 4-bit settings.
        modules_to_not_convert: Module names (and everything inside them) to keep.
        current_key_name: Where ``model`` sits in a larger model (``["model", "layers", "0"]``)
            when a submodule is converted: its names are prefixed with it before they are
            matched against ``modules_to_not_convert``.

    Returns:
        ``model``.

    Raises:
        ValueError: Nothing was replaced (no linear layer outside the skipped modules).
    """
    layer8, layer4 = _layer_classes()
    skip = list(modules_to_not_convert or [])
    config = bnb_quantization_config
    replaced = 0
    prefix = ".".join(current_key_name or [])
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            full = ".".join(part for part in (prefix, name, child_name) if part)
            if type(child) is not torch.nn.Linear or _name_in(full, skip):
                continue
            new = _make_layer(child, config, layer8, layer4)
            setattr(module, child_name, new)
            replaced += 1
    if replaced == 0:
        raise ValueError(
            "load_and_quantize_model quantizes nn.Linear layers; the model has none outside "
            f"the skipped modules {skip}. Check skip_modules, or quantize a model with linear "
            "layers."
        )
    return model


def _make_layer(
    child: torch.nn.Linear, config: BnbQuantizationConfig, layer8: type, layer4: type
) -> torch.nn.Module:
    device = child.weight.device
    has_bias = child.bias is not None
    if config.load_in_8bit:
        new = layer8(
            child.in_features,
            child.out_features,
            bias=has_bias,
            has_fp16_weights=False,
            threshold=float(config.llm_int8_threshold),
            device="meta",
        )
        spec = _QuantSpec(bits=8, module=weakref.ref(new))
    else:
        new = layer4(
            child.in_features,
            child.out_features,
            bias=has_bias,
            compute_dtype=config.bnb_4bit_compute_dtype,
            compress_statistics=config.bnb_4bit_use_double_quant,
            quant_type=config.bnb_4bit_quant_type,
            device="meta",
        )
        spec = _QuantSpec(
            bits=4,
            module=weakref.ref(new),
            quant_type=config.bnb_4bit_quant_type,
            compress_statistics=config.bnb_4bit_use_double_quant,
        )
    new.requires_grad_(False)
    dtype: torch.dtype = config.torch_dtype  # type: ignore[assignment]
    weight_dtype = child.weight.dtype if device.type != "meta" else dtype
    new._parameters["weight"] = PendingQuantization(
        torch.empty(child.weight.shape, dtype=weight_dtype, device="meta"), _accel_quant=spec
    )
    if has_bias:
        new._parameters["bias"] = torch.nn.Parameter(
            torch.empty(child.out_features, dtype=dtype, device="meta"), requires_grad=False
        )
    if config.load_in_8bit:
        new._buffers["SCB"] = torch.empty(child.out_features, device="meta")
    if device.type != "meta":
        with torch.no_grad():
            new._parameters["weight"] = spec.quantize(child.weight.detach())
            if has_bias:
                new._parameters["bias"] = torch.nn.Parameter(
                    child.bias.detach().to(dtype), requires_grad=False
                )
    return new


def has_4bit_bnb_layers(model: torch.nn.Module) -> bool:
    """Whether ``model`` holds bitsandbytes 4-bit linear layers."""
    bnb = require_bnb()
    return any(isinstance(m, bnb.nn.Linear4bit) for m in model.modules())


def quantized_memory_footprint(model: torch.nn.Module) -> dict[str, int]:
    """Bytes held by the model's tensors, split into quantized weights, their scales and
    statistics, and everything else (unique storages, meta tensors excluded).

    Returns:
        ``{"quantized": ..., "statistics": ..., "other": ..., "total": ...}``.
    """
    bnb = require_bnb()
    seen: set[int] = set()
    sizes = {"quantized": 0, "statistics": 0, "other": 0}

    def add(tensor: torch.Tensor | None, kind: str) -> None:
        if tensor is None or tensor.device.type == "meta":
            return
        key = tensor.untyped_storage().data_ptr()
        if key in seen:
            return
        seen.add(key)
        sizes[kind] += tensor.untyped_storage().nbytes()

    for module in model.modules():
        for name, param in module.named_parameters(recurse=False):
            quantized = name == "weight" and isinstance(
                param, (bnb.nn.Int8Params, bnb.nn.Params4bit)
            )
            add(param, "quantized" if quantized else "other")
            state = getattr(param, "quant_state", None)
            if state is not None:
                nested = getattr(state, "state2", None)
                for value in (
                    state.absmax,
                    state.code,
                    getattr(state, "offset", None),
                    getattr(nested, "absmax", None),
                    getattr(nested, "code", None),
                ):
                    if isinstance(value, torch.Tensor):
                        add(value, "statistics")
        for name, buf in module.named_buffers(recurse=False):
            add(buf, "statistics" if name == "SCB" else "other")
    sizes["total"] = sum(sizes.values())
    return sizes

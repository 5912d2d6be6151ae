"""Parameter shapes of common transformers models computed from their config.json alone.

Pure Python: no torch, no transformers. For the families listed in `CONFIG_FAMILIES`, the
tensors (parameters and buffers) a ``transformers`` 5 model class registers follow from a few
config fields; this module lists them under the names the built model gives them, with the
layers [`estimate_memory`][accel_bigmodel.estimate_memory] compares (each no-split block, every other leaf module). Any
config it does not know exactly (another ``model_type``, a field outside the family's known set,
``quantization_config``, ``auto_map``, an unusual rotary embedding, token ids outside the
vocabulary ...) gets ``None``: the caller then builds the real model instead. It never guesses.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ._config_skeleton import (
    _COMMON_KEYS,
    _FLOAT_DTYPE_NAMES,
    _ROPE_FIELDS,
    _ROPE_KEYS,
    _ROPE_TYPES,
    ConfigSkeleton,
    check_layer_counts,
)


@dataclass(frozen=True)
class _Family:
    defaults: Mapping[str, Any]
    """Value of each shape field when the config omits it (``None``: derived)."""
    extra_keys: frozenset[str]
    """Keys of this family that change no shape."""
    build: Callable[[ConfigSkeleton, dict[str, Any]], None]


class _Unknown(Exception):
    """The config is outside what this module knows exactly."""


def _int(config: Mapping[str, Any], key: str) -> int:
    value = config[key]
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise _Unknown(key)
    return value


def _flag(config: Mapping[str, Any], key: str) -> bool:
    value = config[key]
    if not isinstance(value, bool):
        raise _Unknown(key)
    return value


def _rotary_length(
    data: Mapping[str, Any], head_dim: int, partial: float, allow_partial: bool
) -> int:
    """Elements of one rotary ``inv_freq`` buffer, or `_Unknown` for unusual ropes."""
    params: dict[str, Any] = {}
    for key in ("rope_scaling", "rope_parameters"):
        value = data.get(key)
        if value is None:
            continue
        allowed = _ROPE_FIELDS | ({"partial_rotary_factor"} if allow_partial else set())
        if not isinstance(value, dict) or not set(value) <= allowed:
            raise _Unknown(key)
        params.update(value)
    kind = params.get("rope_type", params.get("type", "default"))
    if not isinstance(kind, str) or kind not in _ROPE_TYPES:
        raise _Unknown("rope_type")
    if "partial_rotary_factor" in params:
        partial = params["partial_rotary_factor"]
        if not isinstance(partial, (int, float)) or not 0 < partial <= 1:
            raise _Unknown("partial_rotary_factor")
    dim = int(head_dim * partial)
    return (dim + 1) // 2


def _llama_like(
    *,
    qkv_bias: bool = False,
    qk_norm: bool = False,
    scaled_embed: bool = False,
    sandwich: bool = False,
) -> Callable[[ConfigSkeleton, dict[str, Any]], None]:
    """Builder of the llama-shaped families (embed, decoder layers, norm, rotary, lm_head)."""

    def build(sk: ConfigSkeleton, c: dict[str, Any]) -> None:
        vocab, hidden, inter, heads, kv, head_dim = _decoder_dims(c)
        bias = _flag(c, "attention_bias") if "attention_bias" in c else False
        mlp_bias = _flag(c, "mlp_bias") if "mlp_bias" in c else False
        layer_types = c.get("layer_types")
        n_layers = _int(c, "num_hidden_layers")
        if layer_types is not None and (
            not isinstance(layer_types, list) or len(layer_types) != n_layers
        ):
            raise _Unknown("layer_types")  # transformers refuses it
        q, k = heads * head_dim, kv * head_dim
        sk.add(
            "model.embed_tokens", ("weight", vocab * hidden), *([("embed_scale", 1)] * scaled_embed)
        )
        sk.layers.append("model.embed_tokens")
        for i in range(_int(c, "num_hidden_layers")):
            p = f"model.layers.{i}"
            sk.add(
                f"{p}.self_attn",
                ("q_proj.weight", q * hidden),
                ("k_proj.weight", k * hidden),
                ("v_proj.weight", k * hidden),
                ("o_proj.weight", hidden * q),
                *(
                    [("q_proj.bias", q), ("k_proj.bias", k), ("v_proj.bias", k)]
                    * (bias or qkv_bias)
                ),
                *([("o_proj.bias", hidden)] * bias),
                *([("q_norm.weight", head_dim), ("k_norm.weight", head_dim)] * qk_norm),
            )
            sk.add(
                f"{p}.mlp",
                ("gate_proj.weight", inter * hidden),
                ("up_proj.weight", inter * hidden),
                ("down_proj.weight", hidden * inter),
                *(
                    [("gate_proj.bias", inter), ("up_proj.bias", inter), ("down_proj.bias", hidden)]
                    * mlp_bias
                ),
            )
            norms = ["input_layernorm", "post_attention_layernorm"]
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"] * sandwich
            sk.add(p, *((f"{n}.weight", hidden) for n in norms))
            sk.layers.append(p)
        _decoder_tail(sk, c, hidden, vocab, _rotary_length(c, head_dim, 1.0, allow_partial=False))

    return build


def _decoder_dims(c: Mapping[str, Any]) -> tuple[int, int, int, int, int, int]:
    """``(vocab, hidden, intermediate, heads, key-value heads, head_dim)`` of a decoder."""
    vocab, hidden = _int(c, "vocab_size"), _int(c, "hidden_size")
    heads = _int(c, "num_attention_heads")
    kv = heads if c.get("num_key_value_heads") is None else _int(c, "num_key_value_heads")
    head_dim = hidden // heads if c.get("head_dim") is None else _int(c, "head_dim")
    if c.get("head_dim") is None and hidden % heads:
        raise _Unknown("hidden_size")
    return vocab, hidden, _int(c, "intermediate_size"), heads, kv, head_dim


def _decoder_tail(
    sk: ConfigSkeleton, c: Mapping[str, Any], hidden: int, vocab: int, rotary: int
) -> None:
    """The final norm, the rotary buffers and the lm_head of a ``model.*`` decoder."""
    sk.add("model.norm", ("weight", hidden))
    sk.add("model.rotary_emb", ("inv_freq", rotary), ("original_inv_freq", rotary))
    sk.layers += ["model.norm", "model.rotary_emb"]
    _lm_head(sk, c, vocab * hidden)


def _lm_head(sk: ConfigSkeleton, c: Mapping[str, Any], numel: int) -> None:
    if not _flag(c, "tie_word_embeddings"):
        sk.add("lm_head", ("weight", numel))
    sk.layers.append("lm_head")


def _gpt2(sk: ConfigSkeleton, c: dict[str, Any]) -> None:
    vocab, positions, hidden = _int(c, "vocab_size"), _int(c, "n_positions"), _int(c, "n_embd")
    inner = 4 * hidden if c["n_inner"] is None else _int(c, "n_inner")
    if hidden % _int(c, "n_head") or _flag(c, "add_cross_attention"):
        raise _Unknown("n_head")
    sk.add("transformer", ("wte.weight", vocab * hidden), ("wpe.weight", positions * hidden))
    sk.layers += ["transformer.wte", "transformer.wpe", "transformer.drop"]
    for i in range(_int(c, "n_layer")):
        sk.add(
            f"transformer.h.{i}",
            ("ln_1.weight", hidden),
            ("ln_1.bias", hidden),
            ("attn.c_attn.weight", hidden * 3 * hidden),
            ("attn.c_attn.bias", 3 * hidden),
            ("attn.c_proj.weight", hidden * hidden),
            ("attn.c_proj.bias", hidden),
            ("ln_2.weight", hidden),
            ("ln_2.bias", hidden),
            ("mlp.c_fc.weight", hidden * inner),
            ("mlp.c_fc.bias", inner),
            ("mlp.c_proj.weight", inner * hidden),
            ("mlp.c_proj.bias", hidden),
        )
        sk.layers.append(f"transformer.h.{i}")
    sk.add("transformer.ln_f", ("weight", hidden), ("bias", hidden))
    sk.layers.append("transformer.ln_f")
    _lm_head(sk, c, vocab * hidden)


def _gpt_neox(sk: ConfigSkeleton, c: dict[str, Any]) -> None:
    vocab, hidden, inter = (
        _int(c, "vocab_size"),
        _int(c, "hidden_size"),
        _int(c, "intermediate_size"),
    )
    heads = _int(c, "num_attention_heads")
    rope = c.get("rope_parameters")
    if hidden % heads or (
        any(key in c for key in _ROPE_KEYS)
        and not (isinstance(rope, dict) and "partial_rotary_factor" in rope)
    ):
        raise _Unknown("rope_parameters")  # the legacy rotary fields are converted by transformers
    bias = _flag(c, "attention_bias")
    sk.add("gpt_neox.embed_in", ("weight", vocab * hidden))
    sk.layers += ["gpt_neox.embed_in", "gpt_neox.emb_dropout"]
    for i in range(_int(c, "num_hidden_layers")):
        p = f"gpt_neox.layers.{i}"
        sk.add(
            p,
            ("input_layernorm.weight", hidden),
            ("input_layernorm.bias", hidden),
            ("post_attention_layernorm.weight", hidden),
            ("post_attention_layernorm.bias", hidden),
            ("attention.query_key_value.weight", 3 * hidden * hidden),
            ("attention.dense.weight", hidden * hidden),
            *(
                [("attention.query_key_value.bias", 3 * hidden), ("attention.dense.bias", hidden)]
                * bias
            ),
            ("mlp.dense_h_to_4h.weight", inter * hidden),
            ("mlp.dense_h_to_4h.bias", inter),
            ("mlp.dense_4h_to_h.weight", hidden * inter),
            ("mlp.dense_4h_to_h.bias", hidden),
        )
        sk.layers.append(p)
    rotary = _rotary_length(c, hidden // heads, 0.25, allow_partial=True)
    sk.add("gpt_neox.final_layer_norm", ("weight", hidden), ("bias", hidden))
    sk.add("gpt_neox.rotary_emb", ("inv_freq", rotary), ("original_inv_freq", rotary))
    sk.layers += ["gpt_neox.final_layer_norm", "gpt_neox.rotary_emb"]
    _lm_head(sk, c, vocab * hidden)


def _phi3(sk: ConfigSkeleton, c: dict[str, Any]) -> None:
    vocab, hidden, inter, heads, kv, head_dim = _decoder_dims(c)
    rope = c.get("rope_parameters") or {}
    # Phi-3 turns yarn into its own longrope: only the default rotary embedding is known here.
    if c.get("rope_scaling") is not None or rope.get("rope_type", "default") != "default":
        raise _Unknown("rope_parameters")
    sk.add("model.embed_tokens", ("weight", vocab * hidden))
    sk.layers.append("model.embed_tokens")
    for i in range(_int(c, "num_hidden_layers")):
        p = f"model.layers.{i}"
        sk.add(
            p,
            ("self_attn.qkv_proj.weight", (heads + 2 * kv) * head_dim * hidden),
            ("self_attn.o_proj.weight", hidden * heads * head_dim),
            ("mlp.gate_up_proj.weight", 2 * inter * hidden),
            ("mlp.down_proj.weight", hidden * inter),
            ("input_layernorm.weight", hidden),
            ("post_attention_layernorm.weight", hidden),
        )
        sk.layers.append(p)
    partial = c.get("partial_rotary_factor", 1.0)
    if not isinstance(partial, (int, float)) or not 0 < partial <= 1:
        raise _Unknown("partial_rotary_factor")
    _decoder_tail(sk, c, hidden, vocab, _rotary_length(c, head_dim, partial, allow_partial=True))


_DECODER = frozenset({"max_position_embeddings", "hidden_act", "rms_norm_eps"}) | _ROPE_KEYS
_SLIDING = frozenset({"use_sliding_window", "sliding_window", "max_window_layers", "layer_types"})
_GEMMA = frozenset({"hidden_activation", "use_bidirectional_attention"})


def _sizes(vocab: int, hidden: int, inter: int, layers: int, heads: int) -> dict[str, int]:
    return {
        "vocab_size": vocab,
        "hidden_size": hidden,
        "intermediate_size": inter,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
    }


def _tokens(bos: int | None, eos: int | None, pad: int | None) -> dict[str, int | None]:
    return {"bos_token_id": bos, "eos_token_id": eos, "pad_token_id": pad}


CONFIG_FAMILIES: dict[str, _Family] = {
    "llama": _Family(
        {
            **_sizes(32000, 4096, 11008, 32, 32),
            **_tokens(1, 2, None),
            "num_key_value_heads": None,
            "head_dim": None,
            "tie_word_embeddings": False,
            "attention_bias": False,
            "mlp_bias": False,
        },
        _DECODER | {"pretraining_tp"},
        _llama_like(),
    ),
    "mistral": _Family(
        {
            **_sizes(32000, 4096, 14336, 32, 32),
            **_tokens(1, 2, None),
            "num_key_value_heads": 8,
            "head_dim": None,
            "tie_word_embeddings": False,
        },
        _DECODER | {"sliding_window"},
        _llama_like(),
    ),
    "qwen2": _Family(
        {
            **_sizes(151936, 4096, 22016, 32, 32),
            **_tokens(None, None, None),
            "num_key_value_heads": 32,
            "tie_word_embeddings": False,
        },
        _DECODER | _SLIDING,
        _llama_like(qkv_bias=True),
    ),
    "qwen3": _Family(
        {
            **_sizes(151936, 4096, 22016, 32, 32),
            **_tokens(None, None, None),
            "num_key_value_heads": 32,
            "head_dim": 128,
            "tie_word_embeddings": False,
            "attention_bias": False,
        },
        _DECODER | _SLIDING,
        _llama_like(qk_norm=True),
    ),
    "gemma": _Family(
        {
            **_sizes(256000, 3072, 24576, 28, 16),
            **_tokens(2, 1, 0),
            "num_key_value_heads": 16,
            "head_dim": 256,
            "tie_word_embeddings": True,
            "attention_bias": False,
        },
        _DECODER | _GEMMA,
        _llama_like(scaled_embed=True),
    ),
    "gemma2": _Family(
        {
            **_sizes(256000, 2304, 9216, 26, 8),
            **_tokens(2, 1, 0),
            "num_key_value_heads": 4,
            "head_dim": 256,
            "tie_word_embeddings": True,
            "attention_bias": False,
        },
        _DECODER
        | _GEMMA
        | {
            "query_pre_attn_scalar",
            "sliding_window",
            "layer_types",
            "final_logit_softcapping",
            "attn_logit_softcapping",
            "cache_implementation",
        },
        _llama_like(scaled_embed=True, sandwich=True),
    ),
    "phi3": _Family(
        {
            **_sizes(32064, 3072, 8192, 32, 32),
            **_tokens(1, 32000, 32000),
            "num_key_value_heads": None,
            "tie_word_embeddings": False,
        },
        _DECODER
        | {
            "resid_pdrop",
            "embd_pdrop",
            "original_max_position_embeddings",
            "sliding_window",
            "partial_rotary_factor",
        },
        _phi3,
    ),
    "gpt2": _Family(
        {
            "vocab_size": 50257,
            "n_positions": 1024,
            "n_embd": 768,
            "n_layer": 12,
            "n_head": 12,
            "n_inner": None,
            **_tokens(50256, 50256, None),
            "tie_word_embeddings": True,
            "add_cross_attention": False,
        },
        frozenset(
            {
                "activation_function",
                "resid_pdrop",
                "embd_pdrop",
                "attn_pdrop",
                "layer_norm_epsilon",
                "summary_type",
                "summary_use_proj",
                "summary_activation",
                "summary_proj_to_labels",
                "summary_first_dropout",
                "scale_attn_weights",
                "scale_attn_by_inverse_layer_idx",
                "reorder_and_upcast_attn",
                "n_ctx",
                "task_specific_params",
            }
        ),
        _gpt2,
    ),
    "gpt_neox": _Family(
        {
            **_sizes(50432, 6144, 24576, 44, 64),
            **_tokens(0, 2, None),
            "tie_word_embeddings": False,
            "attention_bias": True,
        },
        _ROPE_KEYS
        | {
            "hidden_act",
            "hidden_dropout",
            "classifier_dropout",
            "max_position_embeddings",
            "layer_norm_eps",
            "use_parallel_residual",
            "is_decoder",
        },
        _gpt_neox,
    ),
}
"""model_type -> what this module knows of it."""


def _check_token_ids(config: Mapping[str, Any], vocab: Any) -> None:
    if isinstance(vocab, bool) or not isinstance(vocab, int):
        raise _Unknown("vocab_size")  # a list or a text: transformers names the field
    for key in ("bos_token_id", "eos_token_id", "pad_token_id"):
        value = config.get(key)
        values = value if isinstance(value, list) else [value]
        for item in values:
            if item is None:
                continue
            if isinstance(item, bool) or not isinstance(item, int) or not 0 <= item < vocab:
                raise _Unknown(key)  # transformers warns about it: let it say so


def skeleton_from_dict(data: Mapping[str, Any]) -> ConfigSkeleton | None:
    """The tensors of the model ``data`` (a config.json's content) describes, or ``None``.

    Args:
        data: The parsed config.json.

    Returns:
        A `ConfigSkeleton`, or ``None`` when the config is not one this module knows
        exactly (the caller then builds the model with transformers).
    """
    model_type = data.get("model_type")
    if not isinstance(model_type, str) or model_type not in CONFIG_FAMILIES:
        return None
    family = CONFIG_FAMILIES[model_type]
    if not set(data) <= _COMMON_KEYS | family.extra_keys | set(family.defaults):
        return None
    if data.get("is_encoder_decoder") or data.get("dtype", data.get("torch_dtype")) not in (
        _FLOAT_DTYPE_NAMES
    ):
        return None
    config = {**family.defaults, **data}
    skeleton = ConfigSkeleton(model_type=model_type)
    try:
        _check_token_ids(config, config.get("vocab_size"))
        family.build(skeleton, config)
    except _Unknown:
        return None
    return skeleton


def skeleton_from_config_file(path: str) -> ConfigSkeleton | None:
    """`skeleton_from_dict` of the config.json at ``path`` (a file or its folder).

    Returns ``None`` when the file is missing, is not a JSON object, or describes a model this
    module does not know exactly.

    Raises:
        ValueError: when a layer or expert count passes ``MAX_LAYERS`` (whatever the family).
    """
    config_path = os.path.join(path, "config.json") if os.path.isdir(path) else path
    try:
        with open(config_path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict):
        return None
    check_layer_counts(data, config_path)
    return skeleton_from_dict(data)

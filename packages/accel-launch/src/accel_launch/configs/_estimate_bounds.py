"""The numbers of a config.json that ``accel estimate-memory`` accepts, checked from the file
alone (no torch, no transformers) before any model is built."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .._errors import ConfigError

SIZE_KEYS = (
    "hidden_size",
    "n_embd",
    "d_model",
    "intermediate_size",
    "n_inner",
    "ffn_dim",
    "moe_intermediate_size",
    "num_attention_heads",
    "n_head",
    "num_key_value_heads",
    "head_dim",
    "vocab_size",
)
"""Sizes of a transformers config: an int >= 1 when given (``null`` lets the model derive it)."""
COUNT_KEYS = ("num_hidden_layers", "n_layer", "num_layers")
"""Layer counts: an int >= 0 when given."""
EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts")
"""Expert counts of a mixture-of-experts config: an int >= 0 when given."""

MAX_PARAMETERS = 10**14
"""Most parameters estimate-memory builds (100 trillion; published models have a few)."""
PER_COUNT = 10_000
"""A layer or expert count above it is left to accel_bigmodel's own rule, which names the key."""
MAX_EXPERT_BLOCKS = 100_000
"""Most layers x experts estimate-memory builds (published models have a few ten thousand)."""


def _first(config: Mapping[str, Any], keys: tuple[str, ...], default: int) -> int:
    for key in keys:
        if isinstance(config.get(key), int):
            return int(config[key])
    return default


def check_config_numbers(data: Mapping[str, Any], source: str) -> None:
    """Refuse a config (``data``, read from ``source``) whose sizes or counts are not whole
    numbers, or whose model is bigger than ``MAX_PARAMETERS`` or ``MAX_EXPERT_BLOCKS``, from
    its numbers alone. A nested ``text_config`` is checked the same way.

    Raises:
        ConfigError: naming the file, the key, its value and the fix.
    """
    for prefix, config in (("", data), ("text_config.", data.get("text_config"))):
        if not isinstance(config, Mapping):
            continue
        for keys, least in ((SIZE_KEYS, 1), (COUNT_KEYS + EXPERT_KEYS, 0)):
            for key in keys:
                value = config.get(key)
                whole = isinstance(value, int) and not isinstance(value, bool)
                if value is not None and not (whole and value >= least):
                    raise ConfigError(
                        f"{source}: {prefix}{key} is a whole number >= {least} in a model "
                        f"config; got {value!r}. Fix that field of the file."
                    )
        _check_size(config, source, prefix)


def _check_size(config: Mapping[str, Any], source: str, prefix: str) -> None:
    hidden = _first(config, ("hidden_size", "n_embd", "d_model"), 0)
    layers = _first(config, COUNT_KEYS, 1)
    inner = _first(config, ("intermediate_size", "n_inner", "ffn_dim"), 4 * hidden)
    experts = _first(config, EXPERT_KEYS, 0)
    expert_inner = _first(config, ("moe_intermediate_size",), inner)
    vocab = _first(config, ("vocab_size",), 0)
    if max(layers, experts) > PER_COUNT:
        return
    if layers * experts > MAX_EXPERT_BLOCKS:
        raise ConfigError(
            f"{source}: {prefix}layers x experts is {layers} x {experts} = {layers * experts}; "
            f"accel estimate-memory builds at most {MAX_EXPERT_BLOCKS} expert blocks (published "
            "models have a few ten thousand). Fix the layer or expert count in the file."
        )
    per_layer = 4 * hidden * hidden + 3 * hidden * inner + 3 * hidden * expert_inner * experts
    parameters = layers * per_layer + 2 * vocab * hidden
    if parameters > MAX_PARAMETERS:
        raise ConfigError(
            f"{source}: its numbers give about {parameters:.2g} parameters ({prefix}hidden_size "
            f"{hidden}, layers {layers}, intermediate size {inner}, experts {experts}, "
            f"vocab_size {vocab}); accel estimate-memory builds at most {MAX_PARAMETERS:.0e} "
            "(published models have a few trillion). Fix those fields of the file."
        )

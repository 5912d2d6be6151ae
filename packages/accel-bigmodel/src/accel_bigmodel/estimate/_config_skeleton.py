"""The description of a model built from its config alone: its tensors and layers, the bytes of
each dtype, and the config keys every family shares (no torch, no transformers).

`_config_shapes` fills a `ConfigSkeleton` for each model family it knows.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Union

DTYPE_BYTES: dict[str, Union[int, float]] = {
    "float64": 8,
    "float32": 4,
    "float16": 2,
    "bfloat16": 2,
    "int64": 8,
    "int32": 4,
    "int16": 2,
    "int8": 1,
    "uint8": 1,
    "int4": 0.5,
    "int2": 0.25,
}
"""Bytes per element of the dtype names a torch-free estimate accepts (as ``dtype_byte_size``)."""


@dataclass
class ConfigSkeleton:
    """The tensors of a model built from a config, without building it."""

    model_type: str
    """The config's ``model_type``."""
    tensors: list[tuple[str, int]] = field(default_factory=list)
    """``(dotted name, number of elements)`` of each floating-point parameter and buffer, tied
    weights listed once (under the first name, as ``named_parameters`` does)."""
    layers: list[str] = field(default_factory=list)
    """Names of the layers compared for the largest one, in module order: each no-split block
    and every other module without children."""

    def add(self, prefix: str, *tensors: tuple[str, int]) -> None:
        """Adds ``tensors`` (names relative to the module ``prefix``)."""
        self.tensors.extend((f"{prefix}.{name}", numel) for name, numel in tensors)


MAX_LAYERS = 10_000
"""Most layers (or experts) one count of a config may ask for; the largest published models
have a few hundred, and a model is built (or described) one layer at a time."""
_COUNT_KEY = re.compile(r"(layers?|experts)$")


def check_layer_counts(data: Mapping[str, Any], source: str, _prefix: str = "") -> None:
    """Refuse a config whose layer or expert counts pass `MAX_LAYERS`, before anything
    is built per layer (a config.json of 200 bytes can ask for a billion layers).

    Nested configs (``text_config`` ...) are checked too.

    Raises:
        ValueError: naming the file, the key, its value, the bound and the fix.
    """
    for key, value in data.items():
        name = f"{_prefix}{key}"
        if isinstance(value, Mapping) and _prefix.count(".") < 8:
            check_layer_counts(value, source, f"{name}.")
        elif (
            isinstance(value, int)
            and not isinstance(value, bool)
            and value > MAX_LAYERS
            and _COUNT_KEY.search(str(key))
        ):
            raise ValueError(
                f"{source}: {name} = {value}; a model config asks for at most {MAX_LAYERS} "
                "layers (or experts) per count, and the largest published models have a few "
                "hundred. Fix the value in the file."
            )


# Keys of any saved config that do not change a parameter shape.
_COMMON_KEYS = frozenset(
    {
        "architectures",
        "transformers_version",
        "torch_dtype",
        "dtype",
        "_name_or_path",
        "model_type",
        "use_cache",
        "initializer_range",
        "output_hidden_states",
        "output_attentions",
        "return_dict",
        "chunk_size_feed_forward",
        "is_encoder_decoder",
        "problem_type",
        "id2label",
        "label2id",
        "bos_token_id",
        "eos_token_id",
        "pad_token_id",
        "tie_word_embeddings",
        "attention_dropout",
    }
)
_ROPE_KEYS = frozenset({"rope_parameters", "rope_scaling", "rope_theta"})
_ROPE_TYPES = frozenset({"default", "linear", "llama3", "yarn"})
_ROPE_FIELDS = frozenset(
    {
        "rope_type",
        "type",
        "rope_theta",
        "factor",
        "low_freq_factor",
        "high_freq_factor",
        "original_max_position_embeddings",
        "beta_fast",
        "beta_slow",
        "attention_factor",
        "mscale",
        "mscale_all_dim",
        "truncate",
    }
)
_FLOAT_DTYPE_NAMES = frozenset({None, "float32", "float16", "bfloat16", "auto"})

"""The estimate from a config's fields equals the estimate of the model transformers builds."""

import json

import pytest

transformers = pytest.importorskip(
    "transformers", reason="transformers is not installed (optional test dependency)"
)

from accel_bigmodel import (  # noqa: E402
    estimate_memory,
    estimate_memory_from_config,
    init_empty_weights,
    named_module_tensors,
)
from accel_bigmodel.estimate._config_shapes import CONFIG_FAMILIES, skeleton_from_dict  # noqa: E402
from accel_bigmodel.estimate._config_skeleton import _COMMON_KEYS, DTYPE_BYTES  # noqa: E402

DTYPES = list(DTYPE_BYTES)
SMALL = {
    "vocab_size": 64,
    "hidden_size": 16,
    "intermediate_size": 24,
    "num_hidden_layers": 2,
    "num_attention_heads": 4,
    "max_position_embeddings": 32,
}
LLAMA3_ROPE = {
    "rope_type": "llama3",
    "rope_theta": 500000.0,
    "factor": 8.0,
    "low_freq_factor": 1.0,
    "high_freq_factor": 4.0,
    "original_max_position_embeddings": 16,
}
YARN_ROPE = {"rope_type": "yarn", "rope_theta": 10000.0, "factor": 4.0}

# (model_type, fields): tied and untied embeddings, grouped-query attention, bias flags, an
# explicit head_dim unlike hidden_size / heads, and the rotary variants the fast path accepts.
CASES = [
    ("llama", {"num_key_value_heads": 2, "tie_word_embeddings": False}),
    (
        "llama",
        {"tie_word_embeddings": True, "attention_bias": True, "mlp_bias": True, "head_dim": 8},
    ),
    ("llama", {"num_key_value_heads": 1, "rope_parameters": LLAMA3_ROPE}),
    ("mistral", {"num_key_value_heads": 2, "head_dim": 6}),
    ("mistral", {"num_key_value_heads": 4, "tie_word_embeddings": True}),
    ("qwen2", {"num_key_value_heads": 2}),
    (
        "qwen2",
        {"num_key_value_heads": 2, "tie_word_embeddings": True, "rope_parameters": YARN_ROPE},
    ),
    ("qwen3", {"num_key_value_heads": 2, "head_dim": 8, "attention_bias": True}),
    ("qwen3", {"num_key_value_heads": 4, "head_dim": 4, "tie_word_embeddings": True}),
    ("gemma", {"num_key_value_heads": 1, "head_dim": 8}),
    ("gemma", {"num_key_value_heads": 2, "head_dim": 4, "tie_word_embeddings": False}),
    ("gemma2", {"num_key_value_heads": 2, "head_dim": 8, "attention_bias": True}),
    ("gemma2", {"num_key_value_heads": 2, "head_dim": 4, "tie_word_embeddings": False}),
    ("gpt2", {"n_embd": 16, "n_layer": 2, "n_head": 4, "n_positions": 32}),
    (
        "gpt2",
        {"n_embd": 16, "n_layer": 3, "n_head": 2, "n_inner": 20, "tie_word_embeddings": False},
    ),
    ("phi3", {"num_key_value_heads": 2, "pad_token_id": 0, "eos_token_id": 1}),
    (
        "phi3",
        {
            "tie_word_embeddings": True,
            "pad_token_id": 0,
            "eos_token_id": 1,
            "rope_parameters": {
                "rope_type": "default",
                "rope_theta": 1e4,
                "partial_rotary_factor": 0.5,
            },
        },
    ),
    ("gpt_neox", {}),
    ("gpt_neox", {"attention_bias": False, "tie_word_embeddings": True}),
]


def _config(model_type, fields):
    base = {"vocab_size": 64, "bos_token_id": 0, "eos_token_id": 0}  # gpt2's ids are 50256
    if model_type != "gpt2":
        base = dict(SMALL)
    return transformers.AutoConfig.for_model(model_type, **base, **fields)


def _meta_model(config):
    with init_empty_weights():
        return transformers.AutoModelForCausalLM.from_config(config)


@pytest.mark.parametrize(("model_type", "fields"), CASES)
def test_fields_give_the_rows_of_the_built_model(tmp_path, model_type, fields):
    config = _config(model_type, fields)
    config.save_pretrained(tmp_path)
    model = _meta_model(config)
    fast = estimate_memory_from_config(tmp_path, DTYPES)
    assert fast is not None, json.loads((tmp_path / "config.json").read_text())
    assert fast == estimate_memory(model, DTYPES)
    assert estimate_memory(tmp_path / "config.json", DTYPES) == fast  # the API takes it too
    # Same tensors under the same names, not only the same sums.
    skeleton = skeleton_from_dict(json.loads((tmp_path / "config.json").read_text()))
    assert skeleton is not None
    built = {name: t.numel() for name, t in named_module_tensors(model, recurse=True)}
    assert dict(skeleton.tensors) == built


@pytest.mark.parametrize("model_type", sorted(CONFIG_FAMILIES))
def test_defaults_and_known_keys_match_the_config_class(model_type):
    family = CONFIG_FAMILIES[model_type]
    defaults = transformers.AutoConfig.for_model(model_type)
    for key, value in family.defaults.items():
        if value is not None:  # None: derived from other fields, as the class derives it
            assert getattr(defaults, key) == value, key
    # Every key a saved config of this family can hold is known (else it takes the slow path).
    saved = set(defaults.to_dict())
    known = _COMMON_KEYS | family.extra_keys | set(family.defaults)
    assert saved <= known, sorted(saved - known)


def test_what_is_not_known_exactly_is_built_instead(tmp_path):
    llama = {"model_type": "llama", **SMALL}
    odd = [
        {"model_type": "opt", **SMALL},  # a family the fast path does not know
        {**llama, "num_experts": 4},  # a field outside the family's known set
        {**llama, "quantization_config": {"quant_method": "bitsandbytes"}},
        {**llama, "auto_map": {"AutoModel": "modeling_x.X"}},
        {**llama, "rope_parameters": {"rope_type": "longrope", "rope_theta": 1e4}},
        {**llama, "hidden_size": 18},  # 18 heads-dims split over 4 heads: not whole
        {**llama, "eos_token_id": 500},  # outside the vocabulary: transformers warns
        {**llama, "num_hidden_layers": "2"},
        {**llama, "model_type": "qwen2", "layer_types": ["full_attention"]},  # 1 type, 2 layers
    ]
    for data in odd:
        assert skeleton_from_dict(data) is None, data
    assert estimate_memory_from_config(tmp_path / "missing", DTYPES) is None
    assert estimate_memory_from_config(tmp_path, ["float8_e4m3fn"]) is None
    # An extra field transformers keeps as an attribute: built, and still the same answer.
    (tmp_path / "config.json").write_text(json.dumps({**llama, "my_note": "x"}))
    assert estimate_memory_from_config(tmp_path) is None
    built = estimate_memory(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps(llama))
    assert estimate_memory_from_config(tmp_path) == built


# config.json files as older transformers releases saved them (rope_scaling and rope_theta at the
# top level, a list of eos ids, torch_dtype, gpt2's n_ctx and summary fields).
RAW = [
    {
        "model_type": "llama",
        **SMALL,
        "num_key_value_heads": 2,
        "eos_token_id": [1, 2],
        "pretraining_tp": 1,
        "rope_scaling": {**LLAMA3_ROPE, "rope_type": "llama3"},
        "rope_theta": 500000.0,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.43.0",
    },
    {
        "model_type": "qwen2",
        **SMALL,
        "num_key_value_heads": 2,
        "rope_scaling": {"type": "linear", "factor": 2.0},
        "rope_theta": 1000000.0,
        "use_sliding_window": False,
        "tie_word_embeddings": True,
    },
    {
        "model_type": "phi3",
        **SMALL,
        "rope_scaling": None,
        "rope_theta": 10000.0,
        "partial_rotary_factor": 0.5,
        "pad_token_id": 0,
        "eos_token_id": 1,
        "sliding_window": 16,
        "original_max_position_embeddings": 32,
        "embd_pdrop": 0.0,
    },
    {
        "model_type": "gpt2",
        "vocab_size": 64,
        "n_ctx": 32,
        "n_positions": 32,
        "n_embd": 16,
        "n_layer": 2,
        "n_head": 2,
        "bos_token_id": 3,
        "eos_token_id": 3,
        "summary_type": "cls_index",
        "task_specific_params": {"text-generation": {"do_sample": True, "max_length": 50}},
    },
]


@pytest.mark.parametrize("data", RAW, ids=[d["model_type"] for d in RAW])
def test_older_config_files_give_the_rows_of_the_built_model(tmp_path, data):
    (tmp_path / "config.json").write_text(json.dumps(data))
    fast = estimate_memory_from_config(tmp_path, DTYPES)
    assert fast is not None
    model = _meta_model(transformers.AutoConfig.from_pretrained(tmp_path))
    assert fast == estimate_memory(model, DTYPES)

"""Translate a transformers model config into Megatron's model-shape arguments.

``MODEL_CONFIGS_TO_MEGATRON_PARSERS`` maps a model type (matched as a substring of
``model.config.model_type``) to a parser ``(plugin, model, batch_data) -> None`` that fills
``plugin.megatron_lm_default_args``; ``add_model_config_to_megatron_parser`` registers more.
Nothing here imports transformers: the parsers read attributes of the config they are given.
"""

from __future__ import annotations

import functools
import logging
import warnings
from collections.abc import Callable
from typing import Any

logger = logging.getLogger("accel_state.plugins")

Parser = Callable[[Any, Any, Any], None]
"""``(megatron_lm_plugin, model, batch_data) -> None``."""

MODEL_CONFIGS_TO_MEGATRON_PARSERS: dict[str, Parser] = {}
"""Model type -> the parser of its config."""


def add_model_config_to_megatron_parser(model_type: str) -> Callable[[Parser], Parser]:
    """Register the decorated function as the parser of ``model_type`` configs.

    Example:
        >>> @add_model_config_to_megatron_parser("my_model")
        ... def parse_my_config(megatron_lm_plugin, model, batch_data): ...
    """

    def register(func: Parser) -> Parser:
        @functools.wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> None:
            return func(*args, **kwargs)

        MODEL_CONFIGS_TO_MEGATRON_PARSERS[model_type] = func
        return wrapper

    return register


def _fill(plugin: Any, model: Any, **values: Any) -> None:
    """Write the common arguments and ``values`` into the plugin's Megatron arguments."""
    args = plugin.megatron_lm_default_args
    args.update(values)
    args["orig_vocab_size"] = model.config.vocab_size
    args["model_return_dict"] = model.config.return_dict


def _sequence_from(
    plugin: Any, override: int | None, name: str, batch_data: Any, fallback: int
) -> int:
    """The sequence length: ``override`` (the plugin's encoder/decoder length, which wins over
    ``seq_length``), else ``seq_length``, else the batch's width, else ``fallback``."""
    if override is not None:
        if plugin.seq_length is not None and plugin.seq_length != override:
            warnings.warn(
                f"MegatronLMPlugin sets seq_length={plugin.seq_length} and {name}={override}; "
                f"{name} is used. Set only one of them.",
                stacklevel=3,
            )
        return override
    if plugin.seq_length is not None:
        return int(plugin.seq_length)
    if batch_data is not None:
        return int(batch_data["input_ids"].shape[1])
    return fallback


@add_model_config_to_megatron_parser("megatron-bert")
def parse_bert_config(megatron_lm_plugin: Any, model: Any, batch_data: Any) -> None:
    """Megatron-BERT: pre-training when the model class is a masked-LM head."""
    config = model.config
    plugin = megatron_lm_plugin
    plugin.seq_length = _sequence_from(
        plugin,
        plugin.encoder_seq_length,
        "encoder_seq_length",
        batch_data,
        config.max_position_embeddings,
    )
    _fill(
        plugin,
        model,
        seq_length=plugin.seq_length,
        model_type_name="bert",
        num_layers=config.num_hidden_layers,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        max_position_embeddings=config.max_position_embeddings,
        pretraining_flag="maskedlm" in type(model).__name__.lower(),
        num_labels=config.num_labels,
    )


@add_model_config_to_megatron_parser("gpt2")
def parse_gpt2_config(megatron_lm_plugin: Any, model: Any, batch_data: Any) -> None:
    """GPT-2: a decoder trained as a language model."""
    config = model.config
    plugin = megatron_lm_plugin
    plugin.seq_length = _sequence_from(
        plugin, plugin.decoder_seq_length, "decoder_seq_length", batch_data, config.n_positions
    )
    _fill(
        plugin,
        model,
        seq_length=plugin.seq_length,
        return_logits=plugin.return_logits,
        tokenizer_type="GPT2BPETokenizer",
        model_type_name="gpt",
        num_layers=config.n_layer,
        hidden_size=config.n_embd,
        num_attention_heads=config.n_head,
        max_position_embeddings=config.n_positions,
        pretraining_flag=True,
    )


@add_model_config_to_megatron_parser("t5")
def parse_t5_config(megatron_lm_plugin: Any, model: Any, batch_data: Any) -> None:
    """T5: encoder and decoder lengths from the plugin, the batch, or the position limit."""
    config = model.config
    plugin = megatron_lm_plugin
    positions = getattr(config, "n_positions", 1024)
    if plugin.encoder_seq_length is None:
        plugin.encoder_seq_length = (
            batch_data["input_ids"].shape[1] if batch_data is not None else positions
        )
    if plugin.decoder_seq_length is None:
        plugin.decoder_seq_length = (
            batch_data["labels"].shape[1] if batch_data is not None else positions
        )
    _fill(
        plugin,
        model,
        encoder_seq_length=plugin.encoder_seq_length,
        decoder_seq_length=plugin.decoder_seq_length,
        model_type_name="t5",
        num_layers=config.num_layers,
        hidden_size=config.d_model,
        num_attention_heads=config.num_heads,
        max_position_embeddings=positions,
        pretraining_flag=True,
    )


def _decoder_seq_length(plugin: Any, config: Any, batch_data: Any) -> int:
    """Llama-style: the plugin's seq_length, else the config's ``max_sequence_length``, else the
    plugin's decoder length, else the batch's width, else the position limit."""
    if plugin.seq_length is not None:
        return int(plugin.seq_length)
    for value in (getattr(config, "max_sequence_length", None), plugin.decoder_seq_length):
        if value is not None:
            return int(value)
    if batch_data is not None:
        return int(batch_data["input_ids"].shape[1])
    return int(config.max_position_embeddings)


@add_model_config_to_megatron_parser("llama")
def parse_llama_config(megatron_lm_plugin: Any, model: Any, batch_data: Any) -> None:
    """Llama: a GPT-style decoder with the Llama 2 tokenizer."""
    config = model.config
    plugin = megatron_lm_plugin
    plugin.seq_length = _decoder_seq_length(plugin, config, batch_data)
    _fill(
        plugin,
        model,
        return_logits=plugin.return_logits,
        tokenizer_type="Llama2Tokenizer",
        model_type_name="gpt",
        num_layers=config.num_hidden_layers,
        pretraining_flag=True,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        max_position_embeddings=config.max_position_embeddings,
        seq_length=plugin.seq_length,
    )


def _rope(config: Any, name: str, default: float) -> Any:
    """A rotary setting: a config attribute (older transformers) or an entry of
    ``rope_parameters`` (transformers 5)."""
    value = getattr(config, name, None)
    if value is None:
        value = (getattr(config, "rope_parameters", None) or {}).get(name, default)
    return value


@add_model_config_to_megatron_parser("glm4_moe")
def parse_glm4_moe_config(megatron_lm_plugin: Any, model: Any, batch_data: Any) -> None:
    """GLM-4 mixture of experts: a GPT-style decoder with grouped-query attention, RMSNorm,
    SwiGLU, partial rotary embeddings and sigmoid-routed experts after ``first_k_dense_replace``
    dense layers."""
    config = model.config
    plugin = megatron_lm_plugin
    plugin.seq_length = _decoder_seq_length(plugin, config, batch_data)
    dense = config.first_k_dense_replace
    _fill(
        plugin,
        model,
        return_logits=plugin.return_logits,
        tokenizer_type="HuggingFaceTokenizer",
        model_type_name="gpt",
        num_layers=config.num_hidden_layers,
        pretraining_flag=False,
        hidden_size=config.hidden_size,
        num_attention_heads=config.num_attention_heads,
        kv_channels=getattr(config, "head_dim", None)
        or config.hidden_size // config.num_attention_heads,
        max_position_embeddings=config.max_position_embeddings,
        seq_length=plugin.seq_length,
        position_embedding_type="rope",
        original_model_type=config.model_type,
        qk_layernorm=config.use_qk_norm,
        add_bias_linear=False,
        group_query_attention=True,
        num_query_groups=config.num_key_value_heads,
        ffn_hidden_size=config.intermediate_size,
        add_qkv_bias=True,
        normalization="RMSNorm",
        swiglu=True,
        moe_ffn_hidden_size=config.moe_intermediate_size,
        moe_shared_expert_intermediate_size=config.moe_intermediate_size,
        moe_router_pre_softmax=True,
        moe_router_score_function="sigmoid",
        moe_router_enable_expert_bias=True,
        moe_router_bias_update_rate=0,
        moe_router_load_balancing_type="seq_aux_loss",
        moe_token_dispatcher_type="alltoall",
        moe_router_topk=config.num_experts_per_tok,
        moe_router_topk_scaling_factor=config.routed_scaling_factor,
        moe_layer_freq=[0] * dense + [1] * (config.num_hidden_layers - dense),
        num_experts=config.n_routed_experts,
        moe_grouped_gemm=True,
        moe_router_dtype="fp32",
        moe_permute_fusion=True,
        moe_aux_loss_coeff=0,
        rotary_base=_rope(config, "rope_theta", 10000.0),
        rope_type="rope",
        rotary_percent=_rope(config, "partial_rotary_factor", 1.0),
        norm_epsilon=1e-3,
        use_flash_attn=True,
        eos_token_id=config.eos_token_id,
    )
    args = plugin.megatron_lm_default_args
    args["rotary-percent"] = 0.5
    if getattr(config, "fp8_param", False):
        for name in ("fp8", "fp8_param", "fp8_param_gather", "fp8_recipe"):
            args[name] = getattr(config, name)
    args["bf16"] = getattr(config, "bf16", False)
    args["untie_embeddings_and_output_weights"] = not config.tie_word_embeddings
    logger.info("Megatron arguments of the GLM-4 MoE config: %s", args)


__all__ = [
    "MODEL_CONFIGS_TO_MEGATRON_PARSERS",
    "add_model_config_to_megatron_parser",
    "parse_bert_config",
    "parse_glm4_moe_config",
    "parse_gpt2_config",
    "parse_llama_config",
    "parse_t5_config",
]

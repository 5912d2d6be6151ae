"""``MegatronLMPlugin``: every field's default, its environment variable (and the reference's
fallback name), the translation into Megatron's argument names, the ``set_*`` steps, and the
transformers config parsers (tiny configs built offline)."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from accel_state import (
    MODEL_CONFIGS_TO_MEGATRON_PARSERS,
    MegatronLMPlugin,
    add_model_config_to_megatron_parser,
    patch_environment,
)
from accel_state import environment_variables as env

# field -> (value given by the environment, its text, the Megatron argument it lands in)
ENV_FIELDS = {
    "tp_degree": (2, "2", "tensor_model_parallel_size"),
    "pp_degree": (3, "3", "pipeline_model_parallel_size"),
    "use_custom_fsdp": (True, "true", "use_custom_fsdp"),
    "no_load_optim": (True, "1", "no_load_optim"),
    "eod_mask_loss": (True, "yes", "eod_mask_loss"),
    "no_save_optim": (True, "on", "no_save_optim"),
    "optimizer_cpu_offload": (True, "1", "optimizer_cpu_offload"),
    "overlap_cpu_optimizer_d2h_h2d": (True, "1", "overlap_cpu_optimizer_d2h_h2d"),
    "use_precision_aware_optimizer": (True, "1", "use_precision_aware_optimizer"),
    "decoder_last_pipeline_num_layers": (4, "4", "decoder_last_pipeline_num_layers"),
    "num_micro_batches": (5, "5", "num_micro_batches"),
    "gradient_clipping": (0.5, "0.5", "clip_grad"),
    "recompute_activations": (True, "1", "recompute_activations"),
    "use_distributed_optimizer": (True, "1", "use_distributed_optimizer"),
    "sequence_parallelism": (True, "1", "sequence_parallel"),
    "recompute_granularity": ("selective", "selective", "recompute_granularity"),
    "recompute_method": ("block", "block", "recompute_method"),
    "recompute_num_layers": (2, "2", "recompute_num_layers"),
    "attention_backend": (False, "0", "attention_backend"),
    "expert_model_parallel_size": (2, "2", "expert_model_parallel_size"),
    "context_parallel_size": (2, "2", "context_parallel_size"),
    "attention_dropout": (0.1, "0.1", "attention_dropout"),
    "hidden_dropout": (0.2, "0.2", "hidden_dropout"),
    "attention_softmax_in_fp32": (False, "false", "attention_softmax_in_fp32"),
    "expert_tensor_parallel_size": (2, "2", "expert_tensor_parallel_size"),
    "calculate_per_token_loss": (False, "0", "calculate_per_token_loss"),
    "use_rotary_position_embeddings": (False, "0", "use_rotary_position_embeddings"),
}

DEFAULTS = {
    "tp_degree": 1,
    "pp_degree": 1,
    "use_custom_fsdp": False,
    "no_load_optim": False,
    "eod_mask_loss": False,
    "no_save_optim": False,
    "optimizer_cpu_offload": False,
    "overlap_cpu_optimizer_d2h_h2d": False,
    "use_precision_aware_optimizer": False,
    "decoder_last_pipeline_num_layers": None,
    "num_micro_batches": 1,
    "gradient_clipping": 1.0,
    "recompute_activations": False,
    "use_distributed_optimizer": False,
    "sequence_parallelism": False,
    "recompute_granularity": "full",
    "recompute_method": "uniform",
    "recompute_num_layers": 1,
    "attention_backend": True,
    "expert_model_parallel_size": 1,
    "context_parallel_size": 1,
    "attention_dropout": 0.0,
    "hidden_dropout": 0.0,
    "attention_softmax_in_fp32": True,
    "expert_tensor_parallel_size": 1,
    "calculate_per_token_loss": True,
    "use_rotary_position_embeddings": True,
    "pipeline_model_parallel_split_rank": None,
    "num_layers_per_virtual_pipeline_stage": None,
    "is_train_batch_min": True,
    "train_iters": None,
    "train_samples": None,
    "weight_decay_incr_style": "constant",
    "start_weight_decay": None,
    "end_weight_decay": None,
    "lr_decay_style": "linear",
    "lr_decay_iters": None,
    "lr_decay_samples": None,
    "lr_warmup_iters": None,
    "lr_warmup_samples": None,
    "lr_warmup_fraction": None,
    "min_lr": 0,
    "consumed_samples": None,
    "no_wd_decay_cond": None,
    "scale_lr_cond": None,
    "lr_mult": 1.0,
    "megatron_dataset_flag": False,
    "seq_length": None,
    "encoder_seq_length": None,
    "decoder_seq_length": None,
    "tensorboard_dir": None,
    "set_all_logging_options": False,
    "eval_iters": 100,
    "eval_interval": 1000,
    "return_logits": False,
    "custom_train_step_class": None,
    "custom_train_step_kwargs": None,
    "custom_model_provider_function": None,
    "custom_prepare_model_function": None,
    "custom_megatron_datasets_provider_function": None,
    "custom_get_batch_function": None,
    "custom_loss_function": None,
    "other_megatron_args": None,
}


def _clean(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(__import__("os").environ):
        if name.startswith(("ACCEL_MEGATRON_LM_", "MEGATRON_LM_")):
            monkeypatch.delenv(name)


def test_every_field_has_the_documented_default(monkeypatch):
    _clean(monkeypatch)
    plugin = MegatronLMPlugin()
    assert {f.name for f in dataclasses.fields(plugin)} == set(DEFAULTS)
    assert {f.name: getattr(plugin, f.name) for f in dataclasses.fields(plugin)} == DEFAULTS
    args = plugin.megatron_lm_default_args
    assert args["DDP_impl"] == "torch" and plugin.DDP_impl == "torch"
    for field, (_, _, argument) in ENV_FIELDS.items():
        assert args[argument] == DEFAULTS[field], field
    for field in ("pipeline_model_parallel_split_rank", "num_layers_per_virtual_pipeline_stage"):
        assert args[field] is None
    assert args["consumed_samples"] is None and args["lr_mult"] == 1.0
    assert (args["eval_iters"], args["eval_interval"], args["megatron_dataset_flag"]) == (
        100,
        1000,
        False,
    )


def test_every_variable_and_its_reference_name_reach_the_field_and_its_argument(monkeypatch):
    _clean(monkeypatch)
    ours = {env.declared(f"ACCEL_MEGATRON_LM_{f.upper()}"): v[1] for f, v in ENV_FIELDS.items()}
    with patch_environment(**{str(k): v for k, v in ours.items()}):
        plugin = MegatronLMPlugin()
    fallbacks = {variable.fallbacks[0]: text for variable, text in ours.items()}
    with patch_environment(**fallbacks):
        from_reference_names = MegatronLMPlugin()
    for field, (value, _, argument) in ENV_FIELDS.items():
        assert getattr(plugin, field) == value, field
        assert getattr(from_reference_names, field) == value, field
        assert plugin.megatron_lm_default_args[argument] == value, field
    assert plugin.DDP_impl == "local"  # pipeline stages and the distributed optimizer
    # An argument wins over the environment.
    with patch_environment(ACCEL_MEGATRON_LM_TP_DEGREE="4", MEGATRON_LM_TP_DEGREE="8"):
        assert MegatronLMPlugin().tp_degree == 4
        assert MegatronLMPlugin(tp_degree=2).tp_degree == 2


def test_bad_values_are_refused_with_the_rule(monkeypatch):
    _clean(monkeypatch)
    with pytest.raises(ValueError, match=r"tp_degree must be an integer >= 1; got 0"):
        MegatronLMPlugin(tp_degree=0)
    with pytest.raises(ValueError, match=r"gradient_clipping .* got -1"):
        MegatronLMPlugin(gradient_clipping=-1)
    with pytest.raises(ValueError, match=r"lr_decay_style must be one of constant, linear"):
        MegatronLMPlugin(lr_decay_style="exp")
    with (
        patch_environment(MEGATRON_LM_PP_DEGREE="two"),
        pytest.raises(ValueError, match="MEGATRON_LM_PP_DEGREE must be an integer"),
    ):
        MegatronLMPlugin()


def test_translation_of_the_other_fields(monkeypatch):
    _clean(monkeypatch)

    def no_decay(name, param):
        return name.endswith("bias")

    plugin = MegatronLMPlugin(
        pipeline_model_parallel_split_rank=1,
        num_layers_per_virtual_pipeline_stage=2,
        consumed_samples=[7],
        no_wd_decay_cond=no_decay,
        scale_lr_cond=no_decay,
        lr_mult=2.0,
        megatron_dataset_flag=True,
        eval_iters=3,
        eval_interval=4,
        tensorboard_dir="tb",
        set_all_logging_options=True,
        other_megatron_args={"swiglu": True, "clip_grad": 3.0},
    )
    args = plugin.megatron_lm_default_args
    assert plugin.consumed_samples == [7, 0, 0] and args["consumed_samples"] == [7, 0, 0]
    assert MegatronLMPlugin(consumed_samples=[1, 2]).consumed_samples == [1, 2, 0]
    assert args["pipeline_model_parallel_split_rank"] == 1
    assert args["num_layers_per_virtual_pipeline_stage"] == 2
    assert args["no_wd_decay_cond"] is no_decay and args["scale_lr_cond"] is no_decay
    assert (args["lr_mult"], args["megatron_dataset_flag"]) == (2.0, True)
    assert (args["eval_iters"], args["eval_interval"]) == (3, 4)
    assert args["tensorboard_dir"] == "tb" and args["log_params_norm"] is True
    assert args["swiglu"] is True and args["clip_grad"] == 3.0  # other_megatron_args win


def test_set_steps_fill_precision_batch_optimizer_and_schedule(monkeypatch):
    _clean(monkeypatch)
    plugin = MegatronLMPlugin(num_micro_batches=2, lr_decay_style="cosine", min_lr=1e-5)
    plugin.set_mixed_precision("fp16")
    assert plugin.megatron_lm_default_args["fp16"] is True and plugin.DDP_impl == "torch"
    plugin.set_mixed_precision("bf16")
    assert plugin.megatron_lm_default_args["bf16"] is True
    assert plugin.megatron_lm_default_args["DDP_impl"] == "local"
    plugin.set_training_args(micro_batch_size=4, dp_degree=2)
    assert plugin.global_batch_size == 16
    args = plugin.megatron_lm_default_args
    assert (args["micro_batch_size"], args["data_parallel_size"], args["global_batch_size"]) == (
        4,
        2,
        16,
    )
    weight = torch.nn.Parameter(torch.zeros(2))
    plugin.set_optimizer_type(torch.optim.AdamW([weight], lr=0.1, betas=(0.8, 0.9), eps=1e-6))
    assert (args["optimizer"], args["adam_beta1"], args["adam_beta2"]) == ("adam", 0.8, 0.9)
    assert (args["adam_eps"], args["lr"], args["weight_decay"]) == (1e-6, 0.1, 0.01)
    plugin.set_optimizer_type(torch.optim.SGD([weight], lr=0.2, momentum=0.5))
    assert (args["optimizer"], args["sgd_momentum"], args["lr"]) == ("sgd", 0.5, 0.2)
    with pytest.raises(ValueError, match="Adam-like or an SGD optimizer; got Adagrad"):
        plugin.set_optimizer_type(torch.optim.Adagrad([weight]))

    class Steps:
        total_num_steps = 100
        warmup_num_steps = 10

    with pytest.warns(UserWarning, match="train_samples is dropped"):
        late = MegatronLMPlugin(train_samples=5)
        late.set_training_args(1, 2)
        late.set_scheduler_args(Steps())
    plugin.set_scheduler_args(Steps())
    assert (plugin.train_iters, plugin.lr_warmup_iters, plugin.lr_warmup_samples) == (50, 5, 0)
    assert args["train_iters"] == 50 and args["lr_warmup_iters"] == 5
    assert (args["lr_decay_style"], args["min_lr"]) == ("cosine", 1e-5)
    assert args["weight_decay_incr_style"] == "constant" and args["train_samples"] is None
    fixed = MegatronLMPlugin(train_iters=7, lr_warmup_iters=1)
    fixed.set_training_args(1, 2)
    fixed.set_scheduler_args(Steps())
    assert (fixed.train_iters, fixed.lr_warmup_iters) == (7, 1)


class _Holder(torch.nn.Module):
    """A model as the parsers see it: a ``config`` and a class name."""

    def __init__(self, config):
        super().__init__()
        self.config = config


def _model(class_name: str, config):
    return type(class_name, (_Holder,), {})(config)


def test_config_parsers_fill_the_model_shape():
    transformers = pytest.importorskip("transformers", reason="needs transformers")
    gpt = _model("GPT2LMHeadModel", transformers.GPT2Config(n_layer=2, n_embd=8, n_head=2))
    plugin = MegatronLMPlugin()
    plugin.set_network_size_args(gpt, {"input_ids": torch.zeros(2, 12)})
    args = plugin.megatron_lm_default_args
    assert (args["num_layers"], args["hidden_size"], args["num_attention_heads"]) == (2, 8, 2)
    assert (args["seq_length"], args["model_type_name"], args["pretraining_flag"]) == (
        12,
        "gpt",
        True,
    )
    assert args["tokenizer_type"] == "GPT2BPETokenizer" and args["orig_vocab_size"] == 50257

    bert = transformers.MegatronBertConfig(
        num_hidden_layers=1, hidden_size=8, num_attention_heads=2, num_labels=3
    )
    plugin = MegatronLMPlugin(encoder_seq_length=16)
    plugin.set_network_size_args(_model("MegatronBertForMaskedLM", bert))
    args = plugin.megatron_lm_default_args
    assert (args["model_type_name"], args["seq_length"], args["pretraining_flag"]) == (
        "bert",
        16,
        True,
    )
    assert args["num_labels"] == 3

    t5 = transformers.T5Config(num_layers=2, d_model=8, num_heads=2)
    plugin = MegatronLMPlugin()
    plugin.set_network_size_args(
        _model("T5ForConditionalGeneration", t5),
        {"input_ids": torch.zeros(1, 6), "labels": torch.zeros(1, 4)},
    )
    args = plugin.megatron_lm_default_args
    assert (args["encoder_seq_length"], args["decoder_seq_length"]) == (6, 4)
    assert (args["model_type_name"], args["max_position_embeddings"]) == ("t5", 1024)

    llama = transformers.LlamaConfig(
        num_hidden_layers=1, hidden_size=8, num_attention_heads=2, max_position_embeddings=32
    )
    plugin = MegatronLMPlugin()
    plugin.set_network_size_args(_model("LlamaForCausalLM", llama))
    args = plugin.megatron_lm_default_args
    assert (args["seq_length"], args["tokenizer_type"]) == (32, "Llama2Tokenizer")

    glm = transformers.Glm4MoeConfig(
        num_hidden_layers=3,
        hidden_size=8,
        num_attention_heads=2,
        num_key_value_heads=1,
        first_k_dense_replace=1,
        n_routed_experts=4,
        num_experts_per_tok=2,
        moe_intermediate_size=4,
        intermediate_size=16,
    )
    plugin = MegatronLMPlugin(seq_length=64)
    plugin.set_network_size_args(_model("Glm4MoeForCausalLM", glm))
    args = plugin.megatron_lm_default_args
    assert args["moe_layer_freq"] == [0, 1, 1] and args["num_experts"] == 4
    assert (args["kv_channels"], args["num_query_groups"], args["seq_length"]) == (4, 1, 64)
    assert (args["rotary_base"], args["rotary_percent"]) == (10000.0, 0.5)
    assert args["untie_embeddings_and_output_weights"] is (not glm.tie_word_embeddings)

    with pytest.raises(ValueError, match="no config parser for model type 'vit'"):
        MegatronLMPlugin().set_network_size_args(_model("ViT", transformers.ViTConfig()))


def test_a_registered_parser_is_used():
    class Config:
        model_type = "tiny_custom"

    @add_model_config_to_megatron_parser("tiny_custom")
    def parse_tiny(plugin, model, batch_data):
        plugin.megatron_lm_default_args["num_layers"] = 7

    try:
        plugin = MegatronLMPlugin()
        holder = _Holder(Config())
        plugin.set_network_size_args(holder)
        assert plugin.megatron_lm_default_args["num_layers"] == 7
        assert parse_tiny.__name__ == "parse_tiny"
    finally:
        MODEL_CONFIGS_TO_MEGATRON_PARSERS.pop("tiny_custom")

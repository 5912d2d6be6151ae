"""Differential test: ``MegatronLMPlugin`` built with the same arguments (and the same
``MEGATRON_LM_*`` variables) in accel and in the reference library gives the same Megatron
arguments, after the same ``set_*`` steps and config parsers.

The reference's plugin needs no Megatron-LM to be built. Deliberate differences, listed in
``docs/migration-behaviour.md`` ("Megatron-LM"), are left out of the comparison:
``context_parallel_size`` defaults to 1 here (2 there), ``recompute_activations`` is written
into the arguments here (dropped there), and the BERT / GPT-2 parsers keep ``seq_length`` when
the encoder / decoder length is unset (the reference replaces it by None).
"""

from __future__ import annotations

import os
import warnings
from typing import Any

import pytest
import torch

pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)
transformers = pytest.importorskip("transformers", reason="needs transformers")

import accel.utils.dataclasses as ours  # noqa: E402
from accelerate.utils import dataclasses as ref  # noqa: E402

_ONLY_HERE = {"recompute_activations"}


def _args(plugin: Any) -> dict[str, Any]:
    return {k: v for k, v in plugin.megatron_lm_default_args.items() if k not in _ONLY_HERE}


def _both(**kwargs: Any) -> tuple[Any, Any]:
    kwargs.setdefault("context_parallel_size", 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ours.MegatronLMPlugin(**kwargs), ref.MegatronLMPlugin(**kwargs)


class _Holder(torch.nn.Module):
    def __init__(self, config: Any) -> None:
        super().__init__()
        self.config = config


def _model(class_name: str, config: Any) -> Any:
    return type(class_name, (_Holder,), {})(config)


def test_plugin_arguments_match_the_reference(monkeypatch):
    for name in list(os.environ):
        if name.startswith(("ACCEL_MEGATRON_LM_", "MEGATRON_LM_")):
            monkeypatch.delenv(name)
    mine, theirs = _both()
    assert _args(mine) == _args(theirs)
    mine, theirs = _both(
        tp_degree=2,
        pp_degree=2,
        num_micro_batches=4,
        gradient_clipping=0.3,
        sequence_parallelism=True,
        use_distributed_optimizer=True,
        consumed_samples=[3],
        eval_iters=5,
        other_megatron_args={"swiglu": True},
    )
    assert _args(mine) == _args(theirs) and mine.DDP_impl == theirs.DDP_impl
    for name, text in {
        "MEGATRON_LM_TP_DEGREE": "2",
        "MEGATRON_LM_RECOMPUTE_GRANULARITY": "selective",
        "MEGATRON_LM_ATTENTION_DROPOUT": "0.25",
        "MEGATRON_LM_EOD_MASK_LOSS": "true",
        "MEGATRON_LM_DECODER_LAST_PIPELINE_NUM_LAYERS": "3",
        "MEGATRON_LM_CONTEXT_PARALLEL_SIZE": "2",
    }.items():
        monkeypatch.setenv(name, text)
    mine, theirs = (ours.MegatronLMPlugin(), ref.MegatronLMPlugin())
    assert _args(mine) == _args(theirs)


def test_set_steps_match_the_reference():
    weight = torch.nn.Parameter(torch.zeros(2))

    class Steps:
        total_num_steps = 40
        warmup_num_steps = 8

    for optimizer in (
        torch.optim.AdamW([weight], lr=0.1, betas=(0.7, 0.8)),
        torch.optim.SGD([weight], lr=0.2, momentum=0.9),
    ):
        mine, theirs = _both(num_micro_batches=2, lr_decay_style="cosine", train_samples=9)
        for plugin in (mine, theirs):
            plugin.set_mixed_precision("bf16")
            plugin.set_training_args(micro_batch_size=3, dp_degree=2)
            plugin.set_optimizer_type(optimizer)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                plugin.set_scheduler_args(Steps())
        assert _args(mine) == _args(theirs)
        assert mine.global_batch_size == theirs.global_batch_size == 12


def test_config_parsers_match_the_reference():
    assert (
        ours.MODEL_CONFIGS_TO_MEGATRON_PARSERS.keys()
        == ref.MODEL_CONFIGS_TO_MEGATRON_PARSERS.keys()
    )
    batch = {"input_ids": torch.zeros(2, 10), "labels": torch.zeros(2, 5)}
    glm = transformers.Glm4MoeConfig(
        num_hidden_layers=2, hidden_size=8, num_attention_heads=2, num_key_value_heads=1
    )
    # The reference reads these as attributes (older transformers kept them there).
    glm.head_dim, glm.rope_theta, glm.partial_rotary_factor, glm.bf16 = 4, 10000.0, 0.5, False
    cases = [
        ("GPT2LMHeadModel", transformers.GPT2Config(n_layer=1, n_embd=8, n_head=2), {}),
        ("GPT2LMHeadModel", transformers.GPT2Config(n_layer=1), {"decoder_seq_length": 7}),
        (
            "MegatronBertForSequenceClassification",
            transformers.MegatronBertConfig(
                num_hidden_layers=1, hidden_size=8, num_attention_heads=2
            ),
            {},
        ),
        ("MegatronBertForMaskedLM", transformers.MegatronBertConfig(), {"encoder_seq_length": 9}),
        ("T5ForConditionalGeneration", transformers.T5Config(num_layers=1, d_model=8), {}),
        ("LlamaForCausalLM", transformers.LlamaConfig(num_hidden_layers=1), {"seq_length": 11}),
        ("Glm4MoeForCausalLM", glm, {}),
    ]
    for class_name, config, kwargs in cases:
        for batch_data in (None, batch):
            mine, theirs = _both(**kwargs)
            model = _model(class_name, config)
            mine.set_network_size_args(model, batch_data)
            theirs.set_network_size_args(model, batch_data)
            assert _args(mine) == _args(theirs), class_name


def test_launcher_flags_parse_as_the_reference_does():
    from accel_launch.cli import parse_args
    from accelerate.commands.launch import launch_command_parser
    from accelerate.utils import str_to_bool

    words = [
        "--use_megatron_lm",
        "--megatron_lm_tp_degree",
        "2",
        "--megatron_lm_pp_degree",
        "1",
        "--megatron_lm_num_micro_batches",
        "3",
        "--megatron_lm_sequence_parallelism",
        "true",
        "--megatron_lm_recompute_activations",
        "false",
        "--megatron_lm_use_distributed_optimizer",
        "true",
        "--megatron_lm_gradient_clipping",
        "0.5",
        "x.py",
    ]
    theirs = vars(launch_command_parser().parse_args(words))
    ours = vars(parse_args(["launch", *words]))
    for name, value in ours.items():
        if not name.startswith(("megatron_lm_", "use_megatron_lm")):
            continue
        expected = theirs[name]
        if isinstance(value, bool) and isinstance(expected, str):
            expected = bool(str_to_bool(expected))
        assert value == expected, name

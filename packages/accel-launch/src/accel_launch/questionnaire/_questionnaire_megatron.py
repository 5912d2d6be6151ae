"""``accel config``: the Megatron-LM section of the questionnaire."""

from __future__ import annotations

from ..configs._engine_configs import MegatronLMConfig
from ._prompts import Prompter, number, whole
from ._questionnaire import _norm, _positive


def ask_megatron(ask: Prompter) -> MegatronLMConfig:
    """Ask the Megatron-LM options: parallel degrees, micro-batches (with pipeline stages),
    sequence parallelism (with tensor parallelism), recomputation, distributed optimizer and
    gradient clipping."""
    mlm = MegatronLMConfig()
    mlm.megatron_lm_tp_degree = ask.ask(
        "Tensor parallelism degree (processes each layer is split over)?", 1, whole, _positive
    )
    if mlm.megatron_lm_tp_degree > 1:
        mlm.megatron_lm_sequence_parallelism = ask.yes_no(
            "Shard activations along the sequence (sequence parallelism)?", False
        )
    mlm.megatron_lm_pp_degree = ask.ask(
        "Pipeline parallelism degree (stages the layers are split into)?", 1, whole, _positive
    )
    if mlm.megatron_lm_pp_degree > 1:
        mlm.megatron_lm_num_micro_batches = ask.ask(
            "How many micro-batches per step?", 1, whole, _positive
        )
    mlm.megatron_lm_recompute_activations = ask.yes_no(
        "Recompute activations in the backward pass (selective recomputation)?", False
    )
    mlm.megatron_lm_use_distributed_optimizer = ask.yes_no(
        "Shard optimizer states over data-parallel ranks (distributed optimizer)?", False
    )
    mlm.megatron_lm_gradient_clipping = ask.ask(
        "Clip gradients to which global norm (0 turns clipping off)?", 1.0, number, _norm
    )
    mlm.validate("megatron_lm_config")
    return mlm


__all__ = ["ask_megatron"]

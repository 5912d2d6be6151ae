"""Small ``transformers`` models built from configs (random weights, no download)."""

from __future__ import annotations

from typing import Any

import torch


def llama(**overrides: Any) -> Any:
    """A Llama decoder with untied embeddings, so the two stages weigh about the same."""
    from transformers import LlamaConfig, LlamaForCausalLM

    settings: dict[str, Any] = dict(
        vocab_size=256,
        hidden_size=128,
        intermediate_size=256,
        num_hidden_layers=6,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=64,
        tie_word_embeddings=False,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
    )
    settings.update(overrides)
    return LlamaForCausalLM(LlamaConfig(**settings))


def gpt2() -> Any:
    """A GPT-2 model: its output head shares the token embedding (tied weights)."""
    from transformers import GPT2Config, GPT2LMHeadModel

    config = GPT2Config(
        n_layer=4,
        n_embd=64,
        n_head=4,
        vocab_size=300,
        n_positions=64,
        bos_token_id=1,
        eos_token_id=2,
    )
    return GPT2LMHeadModel(config)


def prompts(vocab: int, batch: int = 4, seq: int = 16, seed: int = 0) -> torch.Tensor:
    """Random token ids."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (batch, seq), generator=generator)

"""Plain nn.Module models shared by the big-model benchmarks (no model hub needed)."""

from __future__ import annotations

import torch
from torch import nn


class Attention(nn.Module):
    def __init__(self, width: int, kv_width: int) -> None:
        super().__init__()
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, kv_width, bias=False)
        self.v_proj = nn.Linear(width, kv_width, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q = self.q_proj(x)
        k = self.k_proj(x).repeat(1, 1, q.shape[-1] // self.k_proj.out_features)
        v = self.v_proj(x).repeat(1, 1, q.shape[-1] // self.v_proj.out_features)
        scores = torch.softmax(q @ k.transpose(1, 2) / q.shape[-1] ** 0.5, dim=-1)
        return self.o_proj(scores @ v)


class MLP(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.down_proj(torch.nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, width: int, hidden: int, kv_width: int) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(width, bias=False)
        self.self_attn = Attention(width, kv_width)
        self.post_attention_layernorm = nn.LayerNorm(width, bias=False)
        self.mlp = MLP(width, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.self_attn(self.input_layernorm(x))
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaLike(nn.Module):
    def __init__(
        self, vocab: int, width: int, hidden: int, layers: int, kv_width: int | None = None
    ) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(
            DecoderLayer(width, hidden, kv_width or width) for _ in range(layers)
        )
        self.norm = nn.LayerNorm(width, bias=False)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed_tokens(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


class Expert(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.w1 = nn.Linear(width, hidden, bias=False)
        self.w2 = nn.Linear(hidden, width, bias=False)
        self.w3 = nn.Linear(width, hidden, bias=False)


class MoELayer(nn.Module):
    def __init__(self, width: int, hidden: int, experts: int) -> None:
        super().__init__()
        self.input_layernorm = nn.LayerNorm(width, bias=False)
        self.self_attn = Attention(width, width // 8)
        self.gate = nn.Linear(width, experts, bias=False)
        self.experts = nn.ModuleList(Expert(width, hidden) for _ in range(experts))


class MoEDecoder(nn.Module):
    def __init__(self, vocab: int, width: int, hidden: int, layers: int, experts: int) -> None:
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(MoELayer(width, hidden, experts) for _ in range(layers))
        self.norm = nn.LayerNorm(width, bias=False)
        self.lm_head = nn.Linear(width, vocab, bias=False)


def llama_70b() -> LlamaLike:
    """Llama-3-70B shapes: 80 layers, width 8192, MLP 28672, GQA with 8 KV heads."""
    return LlamaLike(vocab=128256, width=8192, hidden=28672, layers=80, kv_width=1024)


def bench_model() -> LlamaLike:
    """About 2.2 GB in float32: 8 layers of width 2048 (the load benchmark)."""
    return LlamaLike(vocab=32000, width=2048, hidden=5632, layers=8)


def moe_100k() -> MoEDecoder:
    """A mixture-of-experts decoder with ~100k modules (32 layers x 768 experts)."""
    return MoEDecoder(vocab=32000, width=1024, hidden=512, layers=32, experts=768)

"""A Llama-shaped model of plain nn.Linear layers (no model hub needed)."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    def __init__(self, width: int, hidden: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.q_proj = nn.Linear(width, width, bias=False)
        self.k_proj = nn.Linear(width, width, bias=False)
        self.v_proj = nn.Linear(width, width, bias=False)
        self.o_proj = nn.Linear(width, width, bias=False)
        self.norm2 = nn.LayerNorm(width)
        self.gate_proj = nn.Linear(width, hidden, bias=False)
        self.up_proj = nn.Linear(width, hidden, bias=False)
        self.down_proj = nn.Linear(hidden, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        q, k, v = self.q_proj(h), self.k_proj(h), self.v_proj(h)
        attn = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o_proj(attn)
        h = self.norm2(x)
        return x + self.down_proj(torch.nn.functional.silu(self.gate_proj(h)) * self.up_proj(h))


class LlamaShaped(nn.Module):
    def __init__(self, vocab: int, width: int, hidden: int, layers: int) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.layers = nn.ModuleList(Block(width, hidden) for _ in range(layers))
        self.norm = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for layer in self.layers:
            x = layer(x)
        return self.lm_head(self.norm(x))


def one_gb_model(layers: int = 4, width: int = 2048) -> LlamaShaped:
    """About 240 M parameters by default: 0.96 GB in float32 (smaller for smoke runs)."""
    return LlamaShaped(vocab=8192, width=width, hidden=width * 11 // 4, layers=layers)


def training_model(layers: int = 4, width: int = 1024) -> LlamaShaped:
    """About 45 M parameters by default, for training-step timings."""
    return LlamaShaped(vocab=4096, width=width, hidden=width * 11 // 4, layers=layers)

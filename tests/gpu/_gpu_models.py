"""Small models and helpers shared by the GPU checks."""

from __future__ import annotations

import pytest
import torch
from torch import nn

DEVICES = [
    pytest.param("cpu", id="cpu"),
    pytest.param("cuda", id="cuda", marks=pytest.mark.cuda),
]
"""Parameters of a check that runs on both devices: the CUDA one skips without a GPU."""


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.nn.functional.gelu(self.up(self.norm(x))))


class TinyStack(nn.Module):
    """Embedding, a list of residual blocks, a head: the shape big-model code expects."""

    def __init__(self, vocab: int = 64, width: int = 32, depth: int = 4) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, vocab)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(ids)
        for block in self.blocks:
            x = block(x)
        return self.head(x)


def regression_mlp(width: int = 64, dropout: float = 0.0) -> nn.Sequential:
    """A seeded MLP whose inner widths are multiples of 16 (what FP8 matrix products need)."""
    torch.manual_seed(0)
    return nn.Sequential(
        nn.Linear(width, 4 * width),
        nn.ReLU(),
        nn.Dropout(dropout),
        nn.Linear(4 * width, 4 * width),
        nn.ReLU(),
        nn.Linear(4 * width, 16),
    )


def regression_data(n: int = 256, width: int = 64) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, width, generator=g)
    w = torch.randn(width, 16, generator=g) / width**0.5
    return x, torch.tanh(x @ w)


def relative(a: torch.Tensor, b: torch.Tensor) -> float:
    """Relative L2 distance of ``a`` from ``b`` (in float32)."""
    a, b = a.detach().float().cpu(), b.detach().float().cpu()
    return ((a - b).norm() / b.norm().clamp_min(1e-30)).item()

"""Small models for the pipeline tests (plain torch, fast to trace)."""

from __future__ import annotations

import torch
from torch import nn


class Block(nn.Module):
    """A residual block; ``width`` sets its weight so that stages can be unbalanced."""

    def __init__(self, dim: int, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(dim)
        self.up = nn.Linear(dim, width)
        self.down = nn.Linear(width, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class Positions(nn.Module):
    """Position features computed without gradients, as rotary embeddings are."""

    def __init__(self, dim: int) -> None:
        super().__init__()
        self.register_buffer("freq", torch.linspace(0.1, 1.0, dim), persistent=False)

    @torch.no_grad()
    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        steps = torch.arange(ids.shape[1], dtype=torch.float32)
        return torch.sin(steps[:, None] * self.freq)[None]


class ToyLM(nn.Module):
    """Embedding, residual blocks of the given widths, a head; returns a dict of two tensors."""

    _no_split_modules = ["Block"]

    def __init__(self, widths: tuple[int, ...] = (32, 32, 32, 32), dim: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, dim)
        self.positions = Positions(dim)
        self.blocks = nn.ModuleList(Block(dim, w) for w in widths)
        self.head = nn.Linear(dim, 5)

    def forward(
        self, ids: torch.Tensor, mask: torch.Tensor | None = None
    ) -> dict[str, torch.Tensor]:
        h = self.embed(ids) + self.positions(ids)
        if mask is not None:
            h = h * mask.unsqueeze(-1)
        for block in self.blocks:
            h = block(h)
        # The head reads the input ids again, as classification heads that look for the last
        # real token do: a later stage needs a model input.
        keep = (ids > 0).unsqueeze(-1)
        return {"logits": self.head(h) * keep, "hidden": h}


class DataDependentGate(nn.Module):
    """Branches in Python on a tensor's value: torch.export cannot capture this."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


class Untraceable(nn.Module):
    """A model with a data-dependent branch in ``blocks.1.gate``."""

    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(50, 8)
        self.blocks = nn.ModuleList(nn.Sequential() for _ in range(2))
        self.blocks[0].add_module("proj", nn.Linear(8, 8))
        self.blocks[1].add_module("gate", DataDependentGate())
        self.blocks[1].add_module("proj", nn.Linear(8, 8))
        self.head = nn.Linear(8, 3)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        h = self.embed(ids)
        for block in self.blocks:
            h = block(h)
        return self.head(h)


def toy_inputs(batch: int, seq: int = 6, seed: int = 0) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 50, (batch, seq), generator=generator)

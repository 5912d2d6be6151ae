"""Small models and checkpoint writers shared by the accel-bigmodel tests."""

from __future__ import annotations

import json
import os

import torch
from torch import nn

from accel_bigmodel import (
    SAFE_WEIGHTS_INDEX_NAME,
    WEIGHTS_INDEX_NAME,
    shard_checkpoint,
    write_safetensors,
)


class Block(nn.Module):
    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 2 * width)
        self.down = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 50, width: int = 16, depth: int = 4, tie: bool = True) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, vocab, bias=False)
        self.register_buffer("scale", torch.ones(width))
        if tie:
            self.head.weight = self.embed.weight

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(ids) * self.scale
        for block in self.blocks:
            hidden = block(hidden)
        return self.head(hidden)


def checkpoint_state(model: nn.Module) -> dict[str, torch.Tensor]:
    """State dict without duplicated tied tensors, as saved by transformers."""
    seen: set[int] = set()
    state = {}
    for name, tensor in model.state_dict().items():
        if tensor.data_ptr() in seen:
            continue
        seen.add(tensor.data_ptr())
        state[name] = tensor.detach().clone().contiguous()
    return state


def save_safetensors_checkpoint(model: nn.Module, folder, max_shard_size="4KB", dtype=None) -> str:
    os.makedirs(folder, exist_ok=True)
    state = checkpoint_state(model)
    if dtype is not None:
        state = {k: v.to(dtype) if v.is_floating_point() else v for k, v in state.items()}
    shards, index = shard_checkpoint(state, max_shard_size, weights_name="model.safetensors")
    for file_name, shard in shards.items():
        write_safetensors(os.path.join(folder, file_name), shard, metadata={"format": "pt"})
    if index is not None:
        with open(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME), "w") as handle:
            json.dump(index, handle)
    return str(folder)


def save_bin_checkpoint(model: nn.Module, folder, max_shard_size="1GB") -> str:
    os.makedirs(folder, exist_ok=True)
    shards, index = shard_checkpoint(checkpoint_state(model), max_shard_size)
    for file_name, shard in shards.items():
        torch.save(shard, os.path.join(folder, file_name))
    if index is not None:
        with open(os.path.join(folder, WEIGHTS_INDEX_NAME), "w") as handle:
            json.dump(index, handle)
    return str(folder)

"""Big model inference with accel-bigmodel, end to end and offline.

1. Build a small transformer-like model, save it as a sharded safetensors checkpoint.
2. Rebuild it with ``init_empty_weights`` (no memory allocated for the weights).
3. ``load_checkpoint_and_dispatch(..., device_map="auto", no_split_module_classes=["Block"])``.
4. Run it, and run it again with a RAM budget small enough that half the blocks go to disk.

Run: ``python examples/big_model_inference.py``
"""

from __future__ import annotations

import json
import os
import tempfile

import torch
from torch import nn

from accel_bigmodel import (
    SAFE_WEIGHTS_INDEX_NAME,
    compute_module_sizes,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    shard_checkpoint,
    write_safetensors,
)


class Block(nn.Module):
    """A residual MLP block: it must stay on one device."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.up = nn.Linear(width, 4 * width)
        self.down = nn.Linear(4 * width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(torch.relu(self.up(self.norm(x))))


class TinyLM(nn.Module):
    def __init__(self, vocab: int = 1000, width: int = 256, depth: int = 8) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))
        self.head = nn.Linear(width, vocab, bias=False)
        self.head.weight = self.embed.weight  # tied embeddings

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        hidden = self.embed(ids)
        for block in self.blocks:
            hidden = block(hidden)
        return self.head(hidden)


def save_sharded(model: nn.Module, folder: str, max_shard_size: str = "2MB") -> None:
    state = {k: v.contiguous() for k, v in model.state_dict().items() if k != "head.weight"}
    shards, index = shard_checkpoint(state, max_shard_size, weights_name="model.safetensors")
    for file_name, shard in shards.items():
        write_safetensors(os.path.join(folder, file_name), shard, metadata={"format": "pt"})
    if index is not None:
        with open(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME), "w") as handle:
            json.dump(index, handle)


def main() -> None:
    torch.manual_seed(0)
    reference = TinyLM().eval()
    ids = torch.randint(0, 1000, (2, 16))
    with torch.no_grad():
        expected = reference(ids)

    with tempfile.TemporaryDirectory() as tmp:
        checkpoint = os.path.join(tmp, "checkpoint")
        os.makedirs(checkpoint)
        save_sharded(reference, checkpoint)

        with init_empty_weights():
            model = TinyLM()
        model = load_checkpoint_and_dispatch(
            model, checkpoint=checkpoint, device_map="auto", no_split_module_classes=["Block"]
        )
        with torch.no_grad():
            got = model(ids)
        torch.testing.assert_close(got, expected)
        print("device map:", model.hf_device_map)

        # Half of the blocks on disk: give the CPU room for half the model.
        with init_empty_weights():
            model = TinyLM()
        half = compute_module_sizes(model)[""] // 2
        model = load_checkpoint_and_dispatch(
            model,
            checkpoint=checkpoint,
            device_map="auto",
            max_memory={"cpu": half, "disk": "1GB"},
            no_split_module_classes=["Block"],
            offload_folder=os.path.join(tmp, "offload"),
        )
        with torch.no_grad():
            got = model(ids)
        torch.testing.assert_close(got, expected)
        on_disk = sorted(k for k, v in model.hf_device_map.items() if v == "disk")
        print("on disk:", on_disk)
    print("ok: outputs match the original model")


if __name__ == "__main__":
    main()

"""The small task every script of this folder trains on, so each script shows only its feature.

The data is generated, never downloaded: sequences of 15 tokens from a vocabulary of 64, and
the label says whether more than half the tokens come from the lower half of the vocabulary.
Each sequence leans to one half (it draws three tokens in four from it, on average), so that
most labels are clear and the model gets above 90% accuracy within the few dozen steps a
script trains; a guess scores about 50%.
The model is built from a config (``ToyConfig``): token embeddings, a few residual MLP blocks,
mean pooling and a linear head. It learns the rule in a few dozen steps on a CPU.

Each item is a dict: ``input_ids`` (15 token ids), ``labels`` (0 or 1) and ``idx`` (its
position in the dataset, so that evaluation can check that every sample is counted once).
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, Dataset


@dataclass
class ToyConfig:
    """Shape of the toy model."""

    vocab_size: int = 64
    """Number of token ids."""
    seq_len: int = 15
    """Tokens per sequence (odd, so that the label is never a tie)."""
    hidden_size: int = 32
    """Width of the embeddings and blocks."""
    num_layers: int = 2
    """Number of residual blocks."""
    num_labels: int = 2
    """Number of classes."""


class ToyDataset(Dataset):
    """``size`` generated sequences; the same ``seed`` gives the same data on every process."""

    def __init__(self, size: int, seed: int = 0, config: ToyConfig | None = None) -> None:
        config = config or ToyConfig()
        generator = torch.Generator().manual_seed(seed)
        half = config.vocab_size // 2
        # The share of lower-half tokens a sequence leans to: 3/4 or 1/4, half of the time each.
        leans_low = torch.rand(size, 1, generator=generator) < 0.5
        share = torch.where(leans_low, 0.75, 0.25)
        low = torch.rand(size, config.seq_len, generator=generator) < share
        tokens = torch.randint(0, half, (size, config.seq_len), generator=generator)
        self.input_ids = torch.where(low, tokens, tokens + half)
        self.labels = (low.sum(dim=1) > config.seq_len // 2).long()

    def __len__(self) -> int:
        return len(self.labels)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        return {
            "input_ids": self.input_ids[index],
            "labels": self.labels[index],
            "idx": torch.tensor(index),
        }


class Block(nn.Module):
    """A residual MLP block: ``x + W2(gelu(W1(norm(x))))``."""

    def __init__(self, hidden_size: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(hidden_size)
        self.up = nn.Linear(hidden_size, 2 * hidden_size)
        self.down = nn.Linear(2 * hidden_size, hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.down(nn.functional.gelu(self.up(self.norm(x))))


class ToyClassifier(nn.Module):
    """Embeddings, ``num_layers`` blocks, mean pooling, a linear head: logits per sequence."""

    def __init__(self, config: ToyConfig | None = None) -> None:
        super().__init__()
        self.config = config or ToyConfig()
        hidden = self.config.hidden_size
        self.embed = nn.Embedding(self.config.vocab_size, hidden)
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(self.config.num_layers))
        self.norm = nn.LayerNorm(hidden)
        self.head = nn.Linear(hidden, self.config.num_labels)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        x = self.embed(input_ids)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x).mean(dim=1))


def compute_loss(model: nn.Module, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    """Cross-entropy of the model's logits on a batch."""
    return nn.functional.cross_entropy(model(batch["input_ids"]), batch["labels"])


def make_dataloaders(
    batch_size: int, train_size: int = 256, eval_size: int = 101, eval_batch_size: int = 8
) -> tuple[DataLoader, DataLoader]:
    """A shuffled training loader and an evaluation loader.

    The evaluation set has 101 samples (a prime): on several processes its last batch is
    incomplete, which ``gather_for_metrics`` must handle without counting a sample twice.
    """
    train = DataLoader(ToyDataset(train_size, seed=0), batch_size=batch_size, shuffle=True)
    evaluation = DataLoader(ToyDataset(eval_size, seed=1), batch_size=eval_batch_size)
    return train, evaluation


def train(
    accelerator: Accelerator,
    model: nn.Module,
    optimizer: torch.optim.Optimizer,
    loader: DataLoader,
    epochs: int,
) -> None:
    """The plain training loop, for the scripts whose feature is elsewhere."""
    model.train()
    for _ in range(epochs):
        for batch in loader:
            accelerator.backward(compute_loss(model, batch))
            optimizer.step()
            optimizer.zero_grad()


def evaluate(accelerator: Accelerator, model: nn.Module, loader: DataLoader) -> tuple[float, int]:
    """Accuracy over the whole evaluation set and the number of samples it counted."""
    model.eval()
    correct = total = 0
    for batch in loader:
        with torch.no_grad():
            predictions = model(batch["input_ids"]).argmax(dim=-1)
        predictions, labels = accelerator.gather_for_metrics((predictions, batch["labels"]))
        correct += (predictions == labels).sum().item()
        total += labels.numel()
    model.train()
    return correct / total, total


def checksum(model: nn.Module) -> float:
    """The sum of every weight of ``model``: equal numbers mean equal training runs."""
    return float(sum(p.detach().double().sum().item() for p in model.parameters()))


def base_parser(description: str | None) -> argparse.ArgumentParser:
    """The options every script of this folder has."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--mixed_precision",
        choices=["no", "fp16", "bf16", "fp8"],
        default=None,
        help="Mixed precision (default: the launcher's setting).",
    )
    parser.add_argument("--cpu", action="store_true", help="Train on the CPU only.")
    parser.add_argument("--num_epochs", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=8, help="Batch size per process.")
    parser.add_argument("--lr", type=float, default=1e-2)
    parser.add_argument("--seed", type=int, default=42)
    return parser


def parse(parser: argparse.ArgumentParser, argv: Sequence[str] | None) -> Any:
    """Parse ``argv`` (the command line when None)."""
    return parser.parse_args(None if argv is None else list(argv))


def prepare_training(
    accelerator: Accelerator, args: Any, batch_size: int | None = None
) -> tuple[nn.Module, torch.optim.Optimizer, DataLoader, DataLoader]:
    """Seed, build the loaders, model and AdamW optimizer, and ``prepare`` them all.

    The scripts whose feature is the setup itself (a scheduler, DeepSpeed's dummy optimizer,
    FSDP's order of preparation) write these steps out instead.
    """
    set_seed(args.seed)
    train_loader, eval_loader = make_dataloaders(batch_size or args.batch_size)
    model = ToyClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    return accelerator.prepare(model, optimizer, train_loader, eval_loader)


def add_memory_limit_argument(parser: argparse.ArgumentParser) -> None:
    """``--simulated_memory_limit``, read by ``simulate_memory_limit``."""
    parser.add_argument(
        "--simulated_memory_limit",
        type=int,
        default=None,
        help="Largest batch that fits (simulates a device's memory); default: no limit.",
    )


def simulate_memory_limit(batch_size: int, limit: int | None) -> None:
    """Raise the out-of-memory error a device raises when a batch does not fit.

    A CPU has no small fixed memory, so ``--simulated_memory_limit N`` stands for a device on
    which at most ``N`` samples fit in one batch.
    """
    if limit is not None and batch_size > limit:
        raise torch.OutOfMemoryError(
            f"out of memory (simulated): a batch of {batch_size} samples does not fit in the "
            f"{limit} samples that --simulated_memory_limit allows"
        )

"""Image classification end to end: a small convolutional network learns handwritten digits.

The data is scikit-learn's ``load_digits`` (1,797 scans of handwritten digits, 8x8 pixels,
ten classes), which ships inside the scikit-learn package: nothing is downloaded. The same
script trains on one process or many; evaluation uses ``gather_for_metrics``, so the
accuracy counts each of the 359 held-out images exactly once whatever the number of
processes. Run it with:

    accel launch --num_processes 2 examples/cv_example.py
    python examples/cv_example.py --cpu --mixed_precision bf16

Each epoch prints the accuracy on the held-out images; a chance guess is 10%, and the
network passes 90% within a few epochs.
"""

from __future__ import annotations

import argparse
from typing import Any

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

EVAL_FRACTION = 0.2
"""Share of the images held out for evaluation."""


def load_digits_tensors() -> tuple[torch.Tensor, torch.Tensor]:
    """The digits as a ``(N, 1, 8, 8)`` float tensor scaled to [0, 1], and their labels."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as error:  # the data ships with scikit-learn
        raise SystemExit(
            "cv_example.py reads scikit-learn's bundled digits, and scikit-learn is not "
            "installed; install it with: pip install scikit-learn"
        ) from error
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    return images, torch.tensor(digits.target, dtype=torch.long)


def get_dataloaders(accelerator: Accelerator, batch_size: int) -> tuple[DataLoader, DataLoader]:
    """A shuffled training loader and an evaluation loader over a fixed split of the digits.

    The split is drawn from a generator seeded with a constant, so every process holds the
    same split; ``prepare`` then gives each process its share of the batches.
    """
    with accelerator.main_process_first():  # one process reads the files first
        images, labels = load_digits_tensors()
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    held_out = int(len(labels) * EVAL_FRACTION)
    eval_ids, train_ids = order[:held_out], order[held_out:]
    train = TensorDataset(images[train_ids], labels[train_ids])
    evaluation = TensorDataset(images[eval_ids], labels[eval_ids])
    return (
        DataLoader(train, batch_size=batch_size, shuffle=True, drop_last=True),
        DataLoader(evaluation, batch_size=2 * batch_size),
    )


class DigitNet(nn.Module):
    """Two convolution blocks (conv, batch norm, ReLU), a max pool, and a two-layer head."""

    def __init__(self, num_classes: int = 10) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(1, 16, kernel_size=3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.Conv2d(16, 32, kernel_size=3, padding=1),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.MaxPool2d(2),  # 8x8 -> 4x4
        )
        self.head = nn.Sequential(
            nn.Flatten(),
            nn.Linear(32 * 4 * 4, 128),
            nn.ReLU(),
            nn.Dropout(0.25),
            nn.Linear(128, num_classes),
        )

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(images))


def training_function(config: dict[str, Any], args: argparse.Namespace) -> float:
    """Train and evaluate; print the accuracy after each epoch and return the last one."""
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    lr, num_epochs, batch_size = config["lr"], int(config["num_epochs"]), config["batch_size"]
    set_seed(int(config["seed"]))
    train_dataloader, eval_dataloader = get_dataloaders(accelerator, batch_size)

    # The model is built after set_seed, so every process starts from the same weights.
    # With several processes, batch norm's statistics are kept per process; convert the
    # model with torch.nn.SyncBatchNorm.convert_sync_batchnorm to share them.
    model = DigitNet()
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=1e-4)
    lr_scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=lr, total_steps=num_epochs * len(train_dataloader)
    )
    # prepare() wraps the model for the processes, shards the loaders' batches between them
    # and makes the optimizer and scheduler step with the wrapped model.
    model, optimizer, train_dataloader, eval_dataloader, lr_scheduler = accelerator.prepare(
        model, optimizer, train_dataloader, eval_dataloader, lr_scheduler
    )

    accuracy = 0.0
    for epoch in range(num_epochs):
        model.train()
        for images, labels in train_dataloader:
            loss = nn.functional.cross_entropy(model(images), labels)
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()

        model.eval()
        correct = total = 0
        for images, labels in eval_dataloader:
            with torch.no_grad():
                predictions = model(images).argmax(dim=-1)
            # Every process's predictions, without the samples repeated to even the last batch.
            predictions, references = accelerator.gather_for_metrics((predictions, labels))
            correct += (predictions == references).sum().item()
            total += references.numel()
        accuracy = correct / total
        accelerator.print(
            f"epoch {epoch}: loss {loss.item():.4f}, accuracy {accuracy:.4f} on {total} images"
        )
    accelerator.end_training()
    return accuracy


def main() -> None:
    parser = argparse.ArgumentParser(description="Train a small CNN on scikit-learn's digits.")
    parser.add_argument(
        "--mixed_precision",
        type=str,
        default=None,
        choices=["no", "fp16", "bf16", "fp8"],
        help="Mixed precision (default: the launcher's setting).",
    )
    parser.add_argument("--cpu", action="store_true", help="Train on the CPU only.")
    parser.add_argument("--num_epochs", type=int, default=5)
    parser.add_argument("--batch_size", type=int, default=32, help="Batch size per process.")
    args = parser.parse_args()
    config = {"lr": 3e-3, "num_epochs": args.num_epochs, "seed": 42, "batch_size": args.batch_size}
    training_function(config, args)


if __name__ == "__main__":
    main()

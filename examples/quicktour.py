"""The quick tour's training loop: the same script trains on one process or many.

A small MLP learns a noisy linear rule from synthetic data, then evaluates with
``gather_for_metrics`` so that the accuracy covers every validation sample exactly once,
whatever the number of processes. Run it with:

    accel-launch --num_processes 2 examples/quicktour.py
"""

from __future__ import annotations

import argparse

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset


def make_data(n: int, seed: int) -> TensorDataset:
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(n, 16, generator=g)
    rule = torch.linspace(-1, 1, 16)
    labels = ((x @ rule + 0.1 * torch.randn(n, generator=g)) > 0).long()
    return TensorDataset(x, labels)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--mixed_precision", default=None)
    args = parser.parse_args()

    accelerator = Accelerator(mixed_precision=args.mixed_precision)
    set_seed(42)
    model = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    train_loader = DataLoader(make_data(2048, 0), batch_size=args.batch_size, shuffle=True)
    eval_loader = DataLoader(make_data(509, 1), batch_size=args.batch_size)  # 509 is prime
    scheduler = torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=3e-3, total_steps=args.epochs * len(train_loader)
    )
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    for epoch in range(args.epochs):
        model.train()
        for inputs, targets in train_loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(inputs), targets)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()

        model.eval()
        correct = total = 0
        for inputs, targets in eval_loader:
            with torch.no_grad():
                predictions = model(inputs).argmax(dim=-1)
            predictions, targets = accelerator.gather_for_metrics((predictions, targets))
            correct += (predictions == targets).sum().item()
            total += targets.numel()
        accelerator.print(
            f"epoch {epoch}: loss {loss.item():.4f}, eval accuracy {correct / total:.3f} "
            f"on {total} samples ({accelerator.num_processes} "
            f"process{'es' if accelerator.num_processes != 1 else ''})"
        )
    assert total == len(eval_loader.dataset), (total, len(eval_loader.dataset))


if __name__ == "__main__":
    main()

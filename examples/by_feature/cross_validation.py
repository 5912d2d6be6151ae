"""K-fold cross-validation: one model per fold, each validated on its held-out fold, and the
folds' test predictions averaged into an ensemble.

Each fold prepares a fresh model, optimizer and dataloaders with the same ``Accelerator``;
``accelerator.free_memory()`` drops the previous fold's objects first. Validation and test
logits are gathered with ``gather_for_metrics``, so every process holds the whole test set's
logits of each fold, in dataset order, and can average them.

    accel launch --num_processes 2 examples/by_feature/cross_validation.py --num_folds 3
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch.utils.data import DataLoader, Subset
from toy_task import ToyClassifier, ToyDataset, base_parser, parse, train


def predict(accelerator: Accelerator, model: torch.nn.Module, loader: DataLoader) -> Any:
    """Gathered logits and labels of the whole set behind ``loader``."""
    model.eval()
    logits, labels = [], []
    for batch in loader:
        with torch.no_grad():
            output = model(batch["input_ids"])
        output, target = accelerator.gather_for_metrics((output, batch["labels"]))
        logits.append(output)
        labels.append(target)
    return torch.cat(logits), torch.cat(labels)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--num_folds", type=int, default=3)
    args = parse(parser, argv)
    if args.num_folds < 2:
        parser.error(f"--num_folds must be at least 2; got {args.num_folds}.")
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    data = ToyDataset(240, seed=0)
    test_set = ToyDataset(101, seed=1)
    folds = torch.arange(len(data)).chunk(args.num_folds)

    fold_accuracies, validated, test_logits = [], 0, []
    for fold, held_out in enumerate(folds):
        accelerator.free_memory()
        train_idx = torch.cat([f for i, f in enumerate(folds) if i != fold]).tolist()
        set_seed(args.seed + fold)
        train_loader = DataLoader(Subset(data, train_idx), batch_size=args.batch_size, shuffle=True)
        valid_loader = DataLoader(Subset(data, held_out.tolist()), batch_size=args.batch_size)
        test_loader = DataLoader(test_set, batch_size=args.batch_size)
        model = ToyClassifier()
        optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
        model, optimizer, train_loader, valid_loader, test_loader = accelerator.prepare(
            model, optimizer, train_loader, valid_loader, test_loader
        )
        train(accelerator, model, optimizer, train_loader, args.num_epochs)
        logits, labels = predict(accelerator, model, valid_loader)
        fold_accuracies.append((logits.argmax(-1) == labels).float().mean().item())
        validated += len(labels)
        logits, test_labels = predict(accelerator, model, test_loader)
        test_logits.append(logits.softmax(-1))
        accelerator.print(f"fold {fold}: validation accuracy {fold_accuracies[-1]:.4f}")

    ensemble = torch.stack(test_logits).mean(0).argmax(-1)
    ensemble_accuracy = (ensemble == test_labels).float().mean().item()
    accelerator.print(
        f"cross-validation: {args.num_folds} folds validated {validated} of {len(data)} samples, "
        f"mean fold accuracy {sum(fold_accuracies) / len(fold_accuracies):.4f}, "
        f"ensemble test accuracy {ensemble_accuracy:.4f} on {len(ensemble)} samples"
    )
    return {
        "validated": validated,
        "test_samples": len(ensemble),
        "fold_accuracies": fold_accuracies,
        "ensemble_accuracy": ensemble_accuracy,
    }


if __name__ == "__main__":
    main()

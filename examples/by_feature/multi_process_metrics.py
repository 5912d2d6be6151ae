"""Metrics across processes: ``gather_for_metrics`` collects every process's predictions and
drops the samples repeated to fill the last batch, so a metric counts each sample once.

With 101 evaluation samples, batches of 8 and 2 processes, the last step has 5 samples for 2
processes of 8 rows: the sampler repeats samples from the start of the set to give every
process a full share, and ``gather_for_metrics`` removes them again. The script gathers the
dataset index of each prediction too and checks that every sample appears exactly once.
``gather_for_metrics(..., use_gather_object=True)`` does the same for lists of Python objects
(decoded texts, for instance).

    accel launch --num_processes 2 examples/by_feature/multi_process_metrics.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from toy_task import base_parser, parse, prepare_training, train


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    model, optimizer, train_loader, eval_loader = prepare_training(accelerator, args)
    train(accelerator, model, optimizer, train_loader, args.num_epochs)

    model.eval()
    correct = 0
    seen: list[int] = []
    labels_text: list[str] = []
    for batch in eval_loader:
        with torch.no_grad():
            predictions = model(batch["input_ids"]).argmax(dim=-1)
        predictions, labels, indices = accelerator.gather_for_metrics(
            (predictions, batch["labels"], batch["idx"])
        )
        correct += (predictions == labels).sum().item()
        seen.extend(indices.tolist())
        # Python objects: one string per sample of this process, gathered the same way.
        names = [f"sample {i}" for i in batch["idx"].tolist()]
        labels_text.extend(accelerator.gather_for_metrics(names, use_gather_object=True))

    size = len(eval_loader.dataset)
    if sorted(seen) != list(range(size)) or len(labels_text) != size:
        raise RuntimeError(
            f"gather_for_metrics must return each of the {size} samples once; got "
            f"{len(seen)} indices ({len(set(seen))} distinct) and {len(labels_text)} objects."
        )
    accuracy = correct / len(seen)
    accelerator.print(
        f"multi-process metrics: {len(seen)} predictions for {size} samples "
        f"({len(set(seen))} distinct), {len(labels_text)} objects, accuracy {accuracy:.4f}"
    )
    return {"count": len(seen), "distinct": len(set(seen)), "accuracy": accuracy}


if __name__ == "__main__":
    main()

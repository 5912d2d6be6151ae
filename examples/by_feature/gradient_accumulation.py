"""Gradient accumulation: ``Accelerator(gradient_accumulation_steps=N)`` and the
``accumulate(model)`` context train on N batches per optimizer step.

Inside ``accumulate`` the loss is scaled by 1/N, gradients are not synchronised between
processes until the N-th batch, and the prepared optimizer and scheduler step only then. So
batches of 8 with 4 accumulation steps train like batches of 32 without accumulation: the
script prints the weight checksum, which is the same for both (up to rounding).

    accel launch --num_processes 2 examples/by_feature/gradient_accumulation.py \
        --batch_size 8 --gradient_accumulation_steps 4
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from accel.utils import set_seed
from toy_task import (
    ToyClassifier,
    base_parser,
    checksum,
    compute_loss,
    evaluate,
    make_dataloaders,
    parse,
)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--gradient_accumulation_steps", type=int, default=4)
    args = parse(parser, argv)

    accelerator = Accelerator(
        cpu=args.cpu,
        mixed_precision=args.mixed_precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
    )
    set_seed(args.seed)
    train_loader, eval_loader = make_dataloaders(args.batch_size)
    model = ToyClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    updates = args.num_epochs * len(train_loader) // args.gradient_accumulation_steps
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=updates)
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    optimizer_steps = 0
    for epoch in range(args.num_epochs):
        for batch in train_loader:
            with accelerator.accumulate(model):
                loss = compute_loss(model, batch)
                accelerator.backward(loss)
                optimizer.step()  # a no-op until the last batch of the group
                scheduler.step()
                optimizer.zero_grad()
            optimizer_steps += accelerator.sync_gradients
        accuracy, _ = evaluate(accelerator, model, eval_loader)
        accelerator.print(f"epoch {epoch}: accuracy {accuracy:.4f}")

    result = {
        "optimizer_steps": optimizer_steps,
        "checksum": checksum(model),
        "accuracy": accuracy,
    }
    accelerator.print(
        f"gradient accumulation: {optimizer_steps} optimizer steps, accuracy {accuracy:.4f}, "
        f"weight checksum {result['checksum']:.10f}"
    )
    return result


if __name__ == "__main__":
    main()

"""Checkpointing and resuming: ``save_state`` every N steps (or every epoch), ``load_state`` to
continue, mid-epoch included, exactly where the interrupted run stopped.

``save_state`` writes the model, optimizer, scheduler, random states, the position of each
prepared dataloader and every object given to ``register_for_checkpointing`` (here the epoch
and step counters). After ``load_state`` the loop goes on: the dataloader skips the batches
the saved run had already seen, so the resumed run ends with the weights an uninterrupted run
ends with.

    accel launch --num_processes 2 examples/by_feature/checkpointing.py \
        --checkpointing_steps 5 --output_dir runs/ckpt
    accel launch --num_processes 2 examples/by_feature/checkpointing.py \
        --resume_from_checkpoint runs/ckpt/step_20 --output_dir runs/ckpt
"""

from __future__ import annotations

import os
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


class Progress:
    """Epoch and step counters, saved and restored with the checkpoint."""

    def __init__(self) -> None:
        self.epoch = 0
        self.step = 0

    def state_dict(self) -> dict[str, int]:
        return {"epoch": self.epoch, "step": self.step}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.epoch, self.step = state["epoch"], state["step"]


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--checkpointing_steps",
        default=None,
        help='Save every N optimizer steps (an integer), or "epoch" to save after each epoch.',
    )
    parser.add_argument(
        "--resume_from_checkpoint", default=None, help="A checkpoint folder to continue from."
    )
    parser.add_argument("--output_dir", default=".", help="Where checkpoints are written.")
    args = parse(parser, argv)
    every = args.checkpointing_steps
    if every is not None and every != "epoch" and not every.isdigit():
        parser.error(
            f'--checkpointing_steps takes an integer or "epoch"; got {every!r}. '
            "Pass e.g. --checkpointing_steps 100 or --checkpointing_steps epoch."
        )

    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    set_seed(args.seed)
    train_loader, eval_loader = make_dataloaders(args.batch_size)
    model = ToyClassifier()
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.lr)
    total_steps = args.num_epochs * len(train_loader)
    scheduler = torch.optim.lr_scheduler.LinearLR(optimizer, 1.0, 0.1, total_iters=total_steps)
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )
    progress = Progress()
    accelerator.register_for_checkpointing(progress)

    if args.resume_from_checkpoint:
        accelerator.load_state(args.resume_from_checkpoint)
        accelerator.print(
            f"resumed from {args.resume_from_checkpoint} at epoch {progress.epoch}, "
            f"step {progress.step}"
        )

    while progress.epoch < args.num_epochs:
        model.train()
        for batch in train_loader:  # after a resume, starts at the saved position
            loss = compute_loss(model, batch)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            progress.step += 1
            if every is not None and every != "epoch" and progress.step % int(every) == 0:
                accelerator.save_state(os.path.join(args.output_dir, f"step_{progress.step}"))
        progress.epoch += 1
        accuracy, _ = evaluate(accelerator, model, eval_loader)
        accelerator.print(f"epoch {progress.epoch - 1}: eval accuracy {accuracy:.4f}")
        if every == "epoch":
            accelerator.save_state(os.path.join(args.output_dir, f"epoch_{progress.epoch - 1}"))

    result = {"steps": progress.step, "accuracy": accuracy, "checksum": checksum(model)}
    accelerator.print(
        f"checkpointing: {progress.step} steps, eval accuracy {accuracy:.4f}, "
        f"weight checksum {result['checksum']:.10f}"
    )
    accelerator.end_training()
    return result


if __name__ == "__main__":
    main()

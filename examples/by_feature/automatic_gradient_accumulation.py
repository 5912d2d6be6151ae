"""Automatic gradient accumulation: keep the batch size the optimizer sees while
``find_executable_batch_size`` shrinks the batch that fits in memory.

The run wants an observed batch of ``--observed_batch_size`` samples per process. When only a
smaller batch fits, the script accumulates ``observed // batch_size`` batches per optimizer
step (``accelerator.gradient_accumulation_steps``), so training follows the same path: the
weight checksum printed at the end is the same (up to rounding) whatever
``--simulated_memory_limit`` forces.

    accel launch --num_processes 2 examples/by_feature/automatic_gradient_accumulation.py \
        --observed_batch_size 32 --simulated_memory_limit 8
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accel import Accelerator
from accel.utils import find_executable_batch_size
from toy_task import (
    add_memory_limit_argument,
    base_parser,
    checksum,
    compute_loss,
    evaluate,
    parse,
    prepare_training,
    simulate_memory_limit,
)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--observed_batch_size", type=int, default=32)
    add_memory_limit_argument(parser)
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)

    @find_executable_batch_size(starting_batch_size=args.observed_batch_size)
    def train(batch_size: int) -> tuple[int, int, float, float]:
        accelerator.free_memory()
        if args.observed_batch_size % batch_size:
            raise ValueError(
                f"the observed batch size {args.observed_batch_size} must be a multiple of the "
                f"batch size that fits ({batch_size}); choose a power of two."
            )
        steps = args.observed_batch_size // batch_size
        accelerator.gradient_accumulation_steps = steps
        model, optimizer, train_loader, eval_loader = prepare_training(
            accelerator, args, batch_size
        )
        for _ in range(args.num_epochs):
            for batch in train_loader:
                simulate_memory_limit(len(batch["labels"]), args.simulated_memory_limit)
                with accelerator.accumulate(model):
                    loss = compute_loss(model, batch)
                    accelerator.backward(loss)
                    optimizer.step()
                    optimizer.zero_grad()
        return batch_size, steps, checksum(model), evaluate(accelerator, model, eval_loader)[0]

    batch_size, steps, weights, accuracy = train()
    accelerator.print(
        f"automatic gradient accumulation: batch size {batch_size} x {steps} accumulation "
        f"steps, accuracy {accuracy:.4f}, weight checksum {weights:.10f}"
    )
    return {
        "batch_size": batch_size,
        "accumulation_steps": steps,
        "checksum": weights,
        "accuracy": accuracy,
    }


if __name__ == "__main__":
    main()

"""Out-of-memory recovery: ``find_executable_batch_size`` runs the training function with a
batch size, and after an out-of-memory error frees memory, halves the batch size and runs it
again, until a batch fits.

Everything that depends on the batch size (dataloaders, and the model and optimizer holding
memory of the failed attempt) is built inside the decorated function, after
``accelerator.free_memory()`` dropped the references of the previous attempt. A CPU has no
small fixed memory, so ``--simulated_memory_limit`` makes larger batches raise the error a GPU
would raise.

    accel launch --num_processes 2 examples/by_feature/memory.py \
        --starting_batch_size 64 --simulated_memory_limit 16
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accel import Accelerator
from accel.utils import find_executable_batch_size
from toy_task import (
    add_memory_limit_argument,
    base_parser,
    compute_loss,
    evaluate,
    parse,
    prepare_training,
    simulate_memory_limit,
)


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--starting_batch_size", type=int, default=64)
    add_memory_limit_argument(parser)
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    tried: list[int] = []

    @find_executable_batch_size(starting_batch_size=args.starting_batch_size)
    def train(batch_size: int) -> float:
        tried.append(batch_size)
        accelerator.free_memory()  # drop what the failed attempt prepared
        model, optimizer, train_loader, eval_loader = prepare_training(
            accelerator, args, batch_size
        )
        for _ in range(args.num_epochs):
            for batch in train_loader:
                simulate_memory_limit(len(batch["labels"]), args.simulated_memory_limit)
                loss = compute_loss(model, batch)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
        return evaluate(accelerator, model, eval_loader)[0]

    accuracy = train()  # no batch size here: the decorator passes it
    accelerator.print(
        f"memory: batch sizes tried {tried}, trained with {tried[-1]}, accuracy {accuracy:.4f}"
    )
    return {"tried": tried, "accuracy": accuracy}


if __name__ == "__main__":
    main()

"""Local SGD: each process trains on its own for ``--local_sgd_steps`` steps without
synchronising gradients, then the processes average their weights.

Fewer synchronisations help when communication is slow (many machines, a slow network).
``LocalSGD`` is a context manager around the loop; ``local_sgd.step()`` after each optimizer
step counts the steps and averages the weights every ``local_sgd_steps``, and leaving the
context averages them once more, so every process ends with the same model. The script checks
both: the weights differ between processes between two averagings and agree at the end.

    accel launch --num_processes 2 examples/by_feature/local_sgd.py --local_sgd_steps 4
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from accel.local_sgd import LocalSGD
from toy_task import base_parser, checksum, compute_loss, evaluate, parse, prepare_training


def spread(accelerator: Accelerator, model: torch.nn.Module) -> float:
    """The largest difference between the processes' weight checksums."""
    sums = accelerator.gather(torch.tensor([checksum(model)], device=accelerator.device))
    return (sums.max() - sums.min()).item()


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--local_sgd_steps", type=int, default=4)
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    model, optimizer, train_loader, eval_loader = prepare_training(accelerator, args)

    largest_spread = 0.0
    with LocalSGD(accelerator, model, local_sgd_steps=args.local_sgd_steps) as local_sgd:
        for _ in range(args.num_epochs):
            for batch in train_loader:
                accelerator.backward(compute_loss(model, batch))
                optimizer.step()
                optimizer.zero_grad()
                local_sgd.step()  # averages the weights every local_sgd_steps calls
                largest_spread = max(largest_spread, spread(accelerator, model))
    final_spread = spread(accelerator, model)
    accuracy, _ = evaluate(accelerator, model, eval_loader)
    accelerator.print(
        f"local SGD: {local_sgd.num_steps} steps, weights averaged every "
        f"{args.local_sgd_steps}; largest spread between processes {largest_spread:.3g}, "
        f"final spread {final_spread:.3g}, accuracy {accuracy:.4f}"
    )
    return {"largest_spread": largest_spread, "final_spread": final_spread, "accuracy": accuracy}


if __name__ == "__main__":
    main()

"""Early stopping across processes: ``set_trigger`` on the process that decides to stop,
``check_trigger`` on every process, so that all of them leave the loop at the same step.

Each process sees its own batches, so the loss that reaches ``--loss_threshold`` first is seen
by one process only. Breaking out there alone would leave the other processes waiting in the
next gradient synchronisation forever; ``check_trigger`` is a collective that tells every
process that one of them set the trigger.

    accel launch --num_processes 2 examples/by_feature/early_stopping.py --loss_threshold 0.35
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from accel import Accelerator
from toy_task import base_parser, compute_loss, evaluate, parse, prepare_training


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--loss_threshold", type=float, default=0.35)
    parser.set_defaults(num_epochs=4)
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    model, optimizer, train_loader, eval_loader = prepare_training(accelerator, args)

    step, planned, stopped, triggered = 0, args.num_epochs * len(train_loader), False, False
    for _ in range(args.num_epochs):
        for batch in train_loader:
            loss = compute_loss(model, batch)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            triggered = loss.item() < args.loss_threshold
            if triggered:
                accelerator.set_trigger()  # this process wants to stop
            if accelerator.check_trigger():  # every process learns it, at this same step
                stopped = True
                break
        if stopped:
            break

    accuracy, _ = evaluate(accelerator, model, eval_loader)
    # Every process prints, to show that all stopped together.
    print(
        f"early stopping: process {accelerator.process_index} stopped at step {step} of "
        f"{planned} (early: {stopped}, its own loss under the threshold: {triggered}), "
        f"accuracy {accuracy:.4f}",
        flush=True,
    )
    return {
        "step": step,
        "planned": planned,
        "stopped": stopped,
        "triggered": triggered,
        "accuracy": accuracy,
    }


if __name__ == "__main__":
    main()

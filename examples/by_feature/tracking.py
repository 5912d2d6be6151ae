"""Experiment tracking: ``log_with`` picks the trackers, ``init_trackers`` starts a run with the
hyper-parameters, ``log`` records metrics (on the main process only), ``end_training`` closes.

TensorBoard writes event files under ``--project_dir``; any other tracker accel knows
(``wandb``, ``mlflow``, ``comet_ml``, ``aim``, ``clearml``, ``dvclive``, ``swanlab``,
``trackio``, or ``all`` that are installed) is chosen with ``--log_with``.

    accel launch --num_processes 2 examples/by_feature/tracking.py \
        --with_tracking --project_dir runs/tracking
    tensorboard --logdir runs/tracking
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from toy_task import base_parser, compute_loss, evaluate, parse, prepare_training


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--with_tracking", action="store_true", help="Log the run's metrics.")
    parser.add_argument("--log_with", default="tensorboard", help="Tracker name(s) or 'all'.")
    parser.add_argument("--project_dir", default="logs", help="Where trackers write.")
    args = parse(parser, argv)

    if args.with_tracking:
        accelerator = Accelerator(
            cpu=args.cpu,
            mixed_precision=args.mixed_precision,
            log_with=args.log_with,
            project_dir=args.project_dir,
        )
        # Every process calls it; only the main process creates a run.
        config = {key: value for key, value in vars(args).items() if value is not None}
        accelerator.init_trackers("tracking_example", config=config)
    else:
        accelerator = Accelerator(cpu=args.cpu, mixed_precision=args.mixed_precision)
    model, optimizer, train_loader, eval_loader = prepare_training(accelerator, args)

    logged = 0
    for epoch in range(args.num_epochs):
        total_loss = torch.zeros((), device=accelerator.device)
        for batch in train_loader:
            loss = compute_loss(model, batch)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            total_loss += loss.detach()
        # The mean of every process's losses, so the logged value covers the whole epoch.
        train_loss = accelerator.reduce(total_loss, "mean").item() / len(train_loader)
        accuracy, _ = evaluate(accelerator, model, eval_loader)
        accelerator.print(f"epoch {epoch}: train loss {train_loss:.4f}, accuracy {accuracy:.4f}")
        if args.with_tracking:
            accelerator.log({"train_loss": train_loss, "accuracy": accuracy}, step=epoch)
            logged += 1

    accelerator.end_training()  # flushes and closes every tracker
    if args.with_tracking:
        where = f"{args.log_with} under {args.project_dir}"
        accelerator.print(f"tracking: logged {logged} epochs to {where}")
    else:
        accelerator.print(
            "tracking: off, nothing was logged; pass --with_tracking to log each epoch to "
            f"{args.log_with} under {args.project_dir}"
        )
    accelerator.print(f"tracking: final accuracy {accuracy:.6f}")
    return {"logged": logged, "accuracy": accuracy}


if __name__ == "__main__":
    main()

"""Profiling: ``ProfileKwargs`` configures ``torch.profiler`` and ``accelerator.profile()``
profiles the block; with ``output_trace_dir`` each process writes a Chrome trace
``trace_rank_<i>.json`` (open it in https://ui.perfetto.dev or chrome://tracing).

A schedule skips the first steps (``wait``), warms up, then records ``active`` steps;
``prof.step()`` after each training step moves it along.

    accel launch --num_processes 2 examples/by_feature/profiler.py --output_dir runs/profile
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

from accel import Accelerator
from accel.utils import ProfileKwargs
from toy_task import base_parser, compute_loss, evaluate, parse, prepare_training


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="profile", help="Where the traces are written.")
    parser.add_argument("--active_steps", type=int, default=3, help="Steps recorded.")
    args = parse(parser, argv)
    profile_kwargs = ProfileKwargs(
        activities=["cpu"],
        schedule_option={"wait": 1, "warmup": 1, "active": args.active_steps, "repeat": 1},
        record_shapes=True,
        profile_memory=True,
        output_trace_dir=args.output_dir,
    )
    accelerator = Accelerator(
        cpu=args.cpu, mixed_precision=args.mixed_precision, kwargs_handlers=[profile_kwargs]
    )
    model, optimizer, train_loader, eval_loader = prepare_training(accelerator, args)
    before, _ = evaluate(accelerator, model, eval_loader)

    steps = 2 + args.active_steps  # wait + warmup + active
    with accelerator.profile() as prof:
        for step, batch in enumerate(train_loader):
            if step == steps:
                break
            accelerator.backward(compute_loss(model, batch))
            optimizer.step()
            optimizer.zero_grad()
            prof.step()

    after, _ = evaluate(accelerator, model, eval_loader)
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=5)
    accelerator.print(table)
    trace = os.path.join(args.output_dir, f"trace_rank_{accelerator.process_index}.json")
    operators = [e for e in prof.key_averages() if not e.key.startswith("ProfilerStep")]
    top = max(operators, key=lambda event: event.self_cpu_time_total).key
    accelerator.print(
        f"profiler: recorded {args.active_steps} steps, busiest operator {top}, "
        f"trace {os.path.basename(trace)} written: {os.path.isfile(trace)}; accuracy "
        f"{before:.4f} before the {steps} steps, {after:.4f} after"
    )
    return {"trace": trace, "top": top, "accuracy_before": before, "accuracy": after}


if __name__ == "__main__":
    main()

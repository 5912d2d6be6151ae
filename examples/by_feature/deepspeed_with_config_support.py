"""DeepSpeed with a config file: the optimizer and scheduler come from the DeepSpeed config when
it defines them, through ``DummyOptim`` and ``DummyScheduler``, else from torch.

The config (``deepspeed_config.json`` beside this script) leaves its batch size, accumulation,
clipping, learning rate, weight decay and warm-up as ``"auto"``: accel fills them from the
script (the prepared dataloader, ``DummyOptim(lr=..., weight_decay=...)``,
``DummyScheduler(warmup_num_steps=...)``). It uses DeepSpeed's ZeRO stage 2 and PyTorch's AdamW
(``"torch_adam": true``), which needs no compiled DeepSpeed operator; use ``"type": "AdamW"``
without it for DeepSpeed's fused Adam on GPUs.

    accel launch --num_processes 2 --use_deepspeed \
        --deepspeed_config_file examples/by_feature/deepspeed_config.json \
        examples/by_feature/deepspeed_with_config_support.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import Accelerator
from accel.utils import DummyOptim, DummyScheduler, set_seed
from toy_task import ToyClassifier, base_parser, compute_loss, evaluate, make_dataloaders, parse


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--weight_decay", type=float, default=0.01)
    parser.add_argument("--num_warmup_steps", type=int, default=5)
    parser.add_argument("--gradient_accumulation_steps", type=int, default=1)
    args = parse(parser, argv)
    accelerator = Accelerator(
        cpu=args.cpu,
        mixed_precision=args.mixed_precision,
        gradient_accumulation_steps=args.gradient_accumulation_steps,
    )
    plugin = accelerator.state.deepspeed_plugin
    config = plugin.deepspeed_config if plugin is not None else {}
    set_seed(args.seed)
    train_loader, eval_loader = make_dataloaders(args.batch_size)
    model = ToyClassifier()

    # The config's optimizer wins when it has one; DummyOptim carries the values for "auto".
    optimizer_cls = DummyOptim if "optimizer" in config else torch.optim.AdamW
    optimizer = optimizer_cls(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    updates = args.num_epochs * len(train_loader) // args.gradient_accumulation_steps
    if "scheduler" in config:
        scheduler = DummyScheduler(
            optimizer, total_num_steps=updates, warmup_num_steps=args.num_warmup_steps
        )
    else:
        scheduler = torch.optim.lr_scheduler.LambdaLR(
            optimizer, lambda step: min(1.0, (step + 1) / args.num_warmup_steps)
        )
    model, optimizer, train_loader, eval_loader, scheduler = accelerator.prepare(
        model, optimizer, train_loader, eval_loader, scheduler
    )

    learning_rates = []
    for epoch in range(args.num_epochs):
        model.train()
        for batch in train_loader:
            with accelerator.accumulate(model):
                accelerator.backward(compute_loss(model, batch))
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad()
            learning_rates.append(scheduler.get_last_lr()[0])
        accuracy, _ = evaluate(accelerator, model, eval_loader)
        accelerator.print(f"epoch {epoch}: accuracy {accuracy:.4f}")

    source = "DeepSpeed config" if "optimizer" in config else "torch"
    stage = plugin.zero_stage if plugin is not None else None
    warmup = [round(lr, 6) for lr in learning_rates[: args.num_warmup_steps + 1]]
    accelerator.print(
        f"deepspeed: {accelerator.distributed_type.value}, ZeRO stage {stage}, optimizer from "
        f"{source}, scheduler from {'DeepSpeed config' if 'scheduler' in config else 'torch'}, "
        f"warm-up learning rates {warmup}, accuracy {accuracy:.4f}"
    )
    return {"stage": stage, "learning_rates": learning_rates, "accuracy": accuracy}


if __name__ == "__main__":
    main()

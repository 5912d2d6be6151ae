"""Big-model inference with offload: build the model without memory (``init_empty_weights``),
plan where each block goes within a memory budget (``infer_auto_device_map``), load the
checkpoint into that plan with the blocks that do not fit offloaded to disk
(``load_checkpoint_and_dispatch``), and run it. Several processes share the prompts with
``split_between_processes``.

The script first writes a sharded safetensors checkpoint of a small model (a real model's
checkpoint comes from its hub or training run), then loads it under a memory budget of
``--max_memory_fraction`` of the model's size; the rest goes to ``--offload_dir``. An offloaded
block is read from disk when the forward pass reaches it, so the outputs equal those of the
model held in memory.

    accel launch --num_processes 2 examples/by_feature/big_model_inference.py \
        --output_dir runs/big_model
"""

from __future__ import annotations

import os
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
from accel import (
    Accelerator,
    infer_auto_device_map,
    init_empty_weights,
    load_checkpoint_and_dispatch,
)
from accel.utils import compute_module_sizes, gather_object, set_seed
from toy_task import ToyClassifier, ToyConfig, ToyDataset, base_parser, parse


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--output_dir", default="big_model", help="Checkpoint and offload.")
    parser.add_argument("--max_memory_fraction", type=float, default=0.5)
    parser.add_argument("--num_prompts", type=int, default=10)
    args = parse(parser, argv)
    accelerator = Accelerator(cpu=args.cpu)
    config = ToyConfig(hidden_size=64, num_layers=6)
    set_seed(args.seed)
    trained = ToyClassifier(config).eval()  # stands for a trained model
    checkpoint = os.path.join(args.output_dir, "checkpoint")
    accelerator.save_model(trained, checkpoint, max_shard_size="40KB")  # main process writes
    accelerator.wait_for_everyone()

    # 1. The model's structure, without allocating its weights.
    with init_empty_weights():
        model = ToyClassifier(config)
    # 2. A plan: what fits in the budget stays in memory, the rest is offloaded to disk.
    size = compute_module_sizes(model)[""]
    budget = int(size * args.max_memory_fraction)
    device_map = infer_auto_device_map(
        model, max_memory={"cpu": budget, "disk": size}, no_split_module_classes=["Block"]
    )
    # 3. Load the checkpoint into the plan (each process its own offload folder).
    offload = os.path.join(args.output_dir, f"offload_{accelerator.process_index}")
    model = load_checkpoint_and_dispatch(
        model,
        checkpoint,
        device_map=device_map,
        offload_folder=offload,
        no_split_module_classes=["Block"],
    ).eval()

    # 4. Each process answers its share of the prompts.
    prompts = ToyDataset(args.num_prompts, seed=3).input_ids
    rows = list(range(args.num_prompts))
    with accelerator.split_between_processes(rows) as mine:
        with torch.no_grad():
            logits = model(prompts[mine])
            expected = trained(prompts[mine])
    difference = (logits - expected).abs().max().item()
    answers = gather_object([(row, logits[i].argmax().item()) for i, row in enumerate(mine)])
    differences = gather_object([difference])
    placement = dict(Counter(device_map.values()))
    accelerator.print(
        f"big model inference: {size} bytes, budget {budget}, placement {placement}, "
        f"{len(answers)} prompts answered, max abs difference with the in-memory model "
        f"{max(differences):.2e}"
    )
    return {"placement": placement, "answers": len(answers), "difference": max(differences)}


if __name__ == "__main__":
    main()

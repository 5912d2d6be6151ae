"""Pipeline-parallel inference: ``prepare_pippy`` cuts the model into one stage per process and
streams micro-batches through the stages (GPipe schedule), so a model too big for one device
runs on several.

The model is traced on example inputs shaped like the real batches; ``split_points="auto"``
balances the stages by size without cutting a module of ``no_split_module_classes`` (or name
the modules: ``split_points=["blocks.2"]``). The output lives on the last process, or on every
process with ``gather_output=True``. The script compares it with the unsplit model's.

    accel launch --num_processes 2 examples/by_feature/pipeline_inference.py
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from accel import PartialState
from accel.inference import prepare_pippy
from accel.utils import set_seed
from toy_task import ToyClassifier, ToyConfig, ToyDataset, base_parser, parse


def main(argv: Sequence[str] | None = None) -> dict[str, Any]:
    """Run the example with ``argv`` (the command line when None); return its results."""
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--num_prompts", type=int, default=8)
    args = parse(parser, argv)
    state = PartialState(cpu=args.cpu)
    set_seed(args.seed)  # the same weights on every process
    model = ToyClassifier(ToyConfig(hidden_size=64, num_layers=4)).eval()
    prompts = ToyDataset(args.num_prompts, seed=4).input_ids
    with torch.no_grad():
        expected = model(prompts)  # the unsplit model, for the check below

    model = prepare_pippy(
        model,
        split_points="auto",
        no_split_module_classes=["Block"],  # cut between blocks, never inside one
        example_args=(prompts,),
        gather_output=True,
    )
    with torch.no_grad():
        logits = model(prompts)
    difference = (logits - expected).abs().max().item()
    if state.is_main_process:
        print(
            f"pipeline inference: {state.num_processes} stages split at "
            f"{model.pippy_split_points}, logits {tuple(logits.shape)}, "
            f"max abs difference with the unsplit model {difference:.2e}",
            flush=True,
        )
    return {"split_points": model.pippy_split_points, "difference": difference}


if __name__ == "__main__":
    main()

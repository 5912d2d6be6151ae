"""``save_state`` of a model with tied weights (an embedding and an output layer sharing one
tensor) into FOLDER; prints the sum of the tied tensor on a ``RESULT`` line.

Usage: ``reference_tied_save.py FOLDER`` (run with ``ACCEL_AS_ACCELERATE=0``: the reference
stores the shared tensor once in ``model.safetensors`` and records no alias).
"""

from __future__ import annotations

import json
import sys

import torch
from accelerate import Accelerator


class Tied(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(5, 3)
        self.head = torch.nn.Linear(3, 5, bias=False)
        self.head.weight = self.emb.weight


if __name__ == "__main__":
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(Tied())
    accelerator.save_state(sys.argv[1])
    print("RESULT " + json.dumps({"sum": model.emb.weight.sum().item()}), flush=True)

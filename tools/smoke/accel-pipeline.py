"""Smoke run of accel-pipeline installed alone: balanced split points on one process, then a
2-process pipeline (through torchrun, bounded by a timeout) whose output matches the whole model.

Run: ``python tools/smoke/accel-pipeline.py`` (prints ``ok: accel-pipeline`` on success).
"""

from __future__ import annotations

import sys

import torch
from accel_pipeline import find_split_points, prepare_pippy
from torch import nn


class Block(nn.Module):
    def __init__(self, dim: int = 16) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.tanh(self.linear(x))


class Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block() for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


def worker() -> None:
    from accel_state import PartialState

    state = PartialState()
    torch.manual_seed(0)
    model = Stack().eval()
    x = torch.randn(4, 16)
    with torch.no_grad():
        expected = model(x)
    piped = prepare_pippy(
        model, example_args=(x,), no_split_module_classes=["Block"], gather_output=True
    )
    with torch.no_grad():
        out = piped(x)
    torch.testing.assert_close(out, expected, atol=1e-5, rtol=1e-5)
    print(f"RANK {state.process_index} OK pipeline", flush=True)


def main() -> None:
    from accel_state.testing import run_distributed

    model = Stack().eval()
    points = find_split_points(
        model, 2, example_args=(torch.randn(2, 16),), no_split_module_classes=["Block"]
    )
    assert points == ["blocks.2"], points
    run = run_distributed(__file__, "--worker", num_processes=2, timeout=300)
    for rank in (0, 1):
        assert f"RANK {rank} OK pipeline" in run.stdout, run.stdout + run.stderr
    print("ok: accel-pipeline")


if __name__ == "__main__":
    worker() if sys.argv[1:] == ["--worker"] else main()

"""Differential tests: ``generate_device_map`` and ``find_pippy_batch_size`` of
``accel.inference`` give the reference's results for the same model and inputs
(``build_pipeline`` / ``pippy_forward`` run on 2 processes in accel-pipeline's tests)."""

from __future__ import annotations

import pytest
import torch

pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)

import accel.inference as ours
import accelerate.inference as ref
from accel.utils import convert_file_size_to_int


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Linear(64, 64)
        self.b = torch.nn.Linear(64, 64)

    def forward(self, x):
        return self.b(self.a(x))


def _model():
    return torch.nn.Sequential(torch.nn.Linear(16, 64), Block(), Block(), torch.nn.Linear(64, 4))


@pytest.mark.parametrize(
    "kwargs",
    [
        {"num_processes": 2},
        {"num_processes": 2, "no_split_module_classes": ["Block"]},
        {"num_processes": 2, "max_memory": {0: 40_000, 1: 80_000}},
    ],
)
def test_generate_device_map_asks_for_the_same_placement(kwargs, monkeypatch):
    """Both compute the same per-stage memory, ask their ``infer_auto_device_map`` for an
    unmerged map, and get the same placement."""
    import accel_pipeline._helpers as helpers

    asked = []

    def spy(original):
        def record(model, **options):
            memory = options.get("max_memory")
            asked.append(
                (
                    {k: convert_file_size_to_int(v) for k, v in memory.items()},
                    options.get("no_split_module_classes"),
                    options["clean_result"],
                )
            )
            return original(model, **options)

        return record

    monkeypatch.setattr(ref, "infer_auto_device_map", spy(ref.infer_auto_device_map))
    monkeypatch.setattr(helpers, "infer_auto_device_map", spy(helpers.infer_auto_device_map))
    model = _model()
    theirs = ref.generate_device_map(model, **kwargs)
    placed = ours.generate_device_map(model, **kwargs)
    assert asked[0] == asked[1]
    for name, _ in model.named_parameters():  # every weight placed once
        owners = [key for key in placed if name.startswith(f"{key}.")]
        assert len(owners) == 1, (name, placed)
    # The same placement too: both keep room on stage 0 for the largest layer still to place,
    # so with equal shares the last layer may be mapped to "disk" in both.
    assert dict(placed) == dict(theirs)


def test_find_pippy_batch_size_matches():
    x = torch.zeros(6, 2)
    cases = [
        ((x,), {}),
        (("text", {"ids": torch.zeros(3, 5)}), {}),
        ((), {"mask": None, "ids": torch.zeros(7)}),
        (("no tensor",), {"flag": True}),
        (None, None),
    ]
    for args, kwargs in cases:
        assert ours.find_pippy_batch_size(args, kwargs) == ref.find_pippy_batch_size(args, kwargs)

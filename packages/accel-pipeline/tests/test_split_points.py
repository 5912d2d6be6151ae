"""Automatic split points: balance by module size, execution order, modules called once."""

from __future__ import annotations

import itertools
import random

import pytest
import torch
from torch import nn
from toy_models import ToyLM, toy_inputs

from accel_pipeline import find_split_points
from accel_pipeline._split_points import (
    balanced_cuts,
    check_called_once,
    check_split_points,
    pipeline_units,
    probe_forward,
)


def _heaviest(weights: list[int], cuts: list[int]) -> int:
    bounds = [0, *cuts, len(weights)]
    return max(sum(weights[a:b]) for a, b in itertools.pairwise(bounds))


def test_balanced_cuts_is_optimal_against_exhaustive_search() -> None:
    rng = random.Random(0)
    for _ in range(500):
        n = rng.randint(2, 8)
        weights = [rng.randint(0, 20) for _ in range(n)]
        allowed = [i for i in range(1, n) if rng.random() < 0.7]
        stages = rng.randint(1, 4)
        if len(allowed) < stages - 1:
            continue
        cuts = balanced_cuts(weights, allowed, stages)
        assert len(cuts) == stages - 1 and set(cuts) <= set(allowed)
        best = min(_heaviest(weights, list(c)) for c in itertools.combinations(allowed, stages - 1))
        assert _heaviest(weights, cuts) == best, (weights, allowed, stages, cuts)


def test_balanced_cuts_needs_enough_places() -> None:
    with pytest.raises(ValueError, match="3 stages need 2 places to cut, but only 1 exist"):
        balanced_cuts([1, 1, 1], [1], 3)


def test_auto_follows_module_sizes() -> None:
    # Block weights grow with their width: one heavy first block is a stage on its own.
    model = ToyLM(widths=(512, 16, 16, 16, 16))
    assert find_split_points(model, 2, (toy_inputs(2),)) == ["blocks.1"]
    model = ToyLM(widths=(16, 16, 16, 16, 512))
    assert find_split_points(model, 2, (toy_inputs(2),)) == ["blocks.4"]
    model = ToyLM(widths=(64,) * 6)
    assert find_split_points(model, 3, (toy_inputs(2),)) == ["blocks.2", "blocks.4"]


def test_auto_keeps_no_split_classes_whole_and_cuts_inside_otherwise() -> None:
    model = ToyLM(widths=(16, 1024))
    # ToyLM._no_split_modules = ["Block"]: only whole blocks can start a stage.
    assert find_split_points(model, 2, (toy_inputs(2),)) == ["blocks.1"]
    # Without it, the heavy block is cut between its two big linear layers.
    assert find_split_points(model, 2, (toy_inputs(2),), no_split_module_classes=[]) == [
        "blocks.1.down"
    ]


class _Reused(nn.Module):
    """Calls ``shared`` twice: it cannot start a stage."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.shared = nn.Linear(4, 256)
        self.back = nn.Linear(256, 4)
        self.last = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.first(x)
        x = self.back(self.shared(x))
        x = self.back(self.shared(x))
        return self.last(x)


def test_auto_skips_modules_called_more_than_once() -> None:
    points = find_split_points(_Reused(), 2, (torch.randn(2, 4),))
    assert points and points[0] not in ("shared", "back"), points


class _OutOfOrder(nn.Module):
    """Registers ``head`` first but calls it last."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(64, 2)
        self.a = nn.Linear(8, 64)
        self.b = nn.Linear(64, 64)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.b(self.a(x)))


def test_auto_uses_execution_order_not_registration_order() -> None:
    model = _OutOfOrder()
    assert list(pipeline_units(model, None)) == ["head", "a", "b"]
    assert find_split_points(model, 2, (torch.randn(2, 8),)) == ["b"]


def test_auto_error_when_too_few_places() -> None:
    model = nn.Sequential(nn.Linear(2, 2))
    with pytest.raises(ValueError, match="needs 2 modules called exactly once to start 3 stages"):
        find_split_points(model, 3, (torch.randn(1, 2),))


def test_explicit_split_points_are_checked() -> None:
    model = ToyLM()
    assert check_split_points(model, ["blocks.2"], 2) == ["blocks.2"]
    with pytest.raises(ValueError, match=r"'blocks\.9' does not\. Close names: \['blocks\.3'"):
        check_split_points(model, ["blocks.9"], 2)
    with pytest.raises(ValueError, match=r"Pass split_points=\['blocks.1'\]"):
        check_split_points(model, "blocks.1", 2)
    with pytest.raises(ValueError, match="3 processes need 2 split points; got 1"):
        check_split_points(model, ["blocks.1"], 3)
    with pytest.raises(ValueError, match=r"\['blocks\.1'\] appear more than once in \["):
        check_split_points(model, ["blocks.1", "blocks.1"], 3)


def _probe(model: nn.Module, names: list[str]):
    watch = {name: model.get_submodule(name) for name in names}
    return probe_forward(model, (toy_inputs(2),), {}, watch)


def test_split_points_out_of_execution_order_are_named() -> None:
    model = ToyLM()
    names = check_split_points(model, ["blocks.2", "blocks.0"], 3)
    with pytest.raises(ValueError) as info:
        check_called_once(_probe(model, names), names)
    assert str(info.value) == (
        "Split points must be listed in the order the forward pass runs them (stage k starts "
        "at the k-th); 'blocks.2' is listed before 'blocks.0' but runs after it. Pass "
        "split_points=['blocks.0', 'blocks.2']."
    )
    check_called_once(_probe(model, ["blocks.0", "blocks.2"]), ["blocks.0", "blocks.2"])


def test_more_split_points_than_processes_allow() -> None:
    with pytest.raises(ValueError) as info:
        check_split_points(ToyLM(), ["blocks.1", "blocks.2", "blocks.3"], 2)
    assert str(info.value) == (
        "There is one pipeline stage per process, so 2 processes need 1 split points; got 3: "
        "['blocks.1', 'blocks.2', 'blocks.3']. Pass 1 module names, or split_points='auto'."
    )


@pytest.mark.parametrize("bad", [3, None, b"blocks.1", {"blocks.1": 1}])
def test_split_points_of_the_wrong_type(bad: object) -> None:
    with pytest.raises(ValueError, match=r"split_points must be 'auto' or a list of module names"):
        check_split_points(ToyLM(), bad, 2)

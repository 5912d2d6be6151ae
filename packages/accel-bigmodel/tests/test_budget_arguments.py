"""Every budget the reference library accepts is accepted, with the same result.

transformers hands ``get_max_memory`` back 90% of the memory it measured (a float), quantizers
scale budgets by 0.9, and user code passes numpy or torch numbers: the reference converts size
strings only and passes every number (and ``None``) on. These tests compare with the reference
(bench group) where it is installed, and check the values themselves where it is not.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pytest
import torch
from torch import nn

from accel_bigmodel import (
    DeviceMapError,
    get_balanced_memory,
    get_max_memory,
    infer_auto_device_map,
)

SIZES = 2176 + 4224 + 528  # the three Linear layers of _net(), float32


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 32), nn.Linear(32, 4))


# (budget, what get_max_memory returns)
ACCEPTED: list[tuple[dict[Any, Any], dict[Any, Any]]] = [
    ({"cpu": 21861303091.2}, {"cpu": 21861303091.2}),  # transformers' 90% of the free memory
    ({"cpu": 2500.7}, {"cpu": 2500.7}),
    ({"cpu": np.int64(5000)}, {"cpu": 5000}),
    ({"cpu": np.float32(3000.5)}, {"cpu": 3000.5}),
    ({"cpu": torch.tensor(5000)}, {"cpu": 5000}),
    ({"cpu": torch.tensor(7000.5)}, {"cpu": 7000.5}),
    ({"cpu": -5}, {"cpu": -5}),
    ({"cpu": None}, {"cpu": None}),
    ({"cpu": float("inf")}, {"cpu": float("inf")}),
    ({"cpu": True}, {"cpu": 1}),
    ({0: 3000.5, 1: None, "cpu": 10_000}, {0: 3000.5, 1: None, "cpu": 10_000}),
    ({0: -1, "cpu": 7000.9}, {0: -1, "cpu": 7000.9}),
    ({"cpu": 5000, "disk": None}, {"cpu": 5000, "disk": None}),
    ({"cpu": SIZES - 0.5, "disk": "1GB"}, {"cpu": SIZES - 0.5, "disk": 10**9}),
]


def _reference() -> Any:
    pytest.importorskip("accelerate", reason="the reference library (bench group) is absent")
    from accelerate.utils import modeling

    return modeling


@pytest.mark.parametrize(("budget", "expected"), ACCEPTED)
def test_get_max_memory_keeps_numbers_as_the_reference(budget, expected):
    result = get_max_memory(dict(budget))
    assert result == expected
    assert all(type(v) in (int, float, type(None)) for v in result.values())


@pytest.mark.parametrize(("budget", "expected"), ACCEPTED)
def test_same_results_as_the_reference(budget, expected):
    reference = _reference()
    assert get_max_memory(dict(budget)) == reference.get_max_memory(dict(budget))
    ours = infer_auto_device_map(_net(), dict(budget), clean_result=False)
    try:
        theirs = dict(reference.infer_auto_device_map(_net(), dict(budget), clean_result=False))
    except TypeError:  # None on a device that runs offloaded layers: the reference fails
        assert budget.get("cpu", 0) is None
        return
    assert ours == theirs
    try:
        theirs_balanced = reference.get_balanced_memory(_net(), dict(budget))
    except (TypeError, RuntimeError):  # None on a GPU, or a "disk" key: the reference fails
        return
    assert get_balanced_memory(_net(), dict(budget)) == theirs_balanced


def test_fractions_of_a_byte_hold_nothing():
    """A budget a fraction short of the model offloads, as the reference's comparison does."""
    device_map = infer_auto_device_map(_net(), {"cpu": SIZES - 0.5, "disk": "1GB"})
    assert "disk" in device_map.values()
    assert infer_auto_device_map(_net(), {"cpu": SIZES + 4224 + 0.5}) == {"": "cpu"}


def test_none_and_inf_are_budgets_without_limit():
    assert set(infer_auto_device_map(_net(), {"cpu": None}).values()) == {"cpu"}
    assert set(infer_auto_device_map(_net(), {"cpu": math.inf}).values()) == {"cpu"}


def test_balanced_budgets_with_float_and_none_entries():
    budget = get_balanced_memory(_net(), {0: 10**9 + 0.5, 1: None, "cpu": 10**9})
    assert budget[1] is None  # the last GPU keeps its budget
    assert 0 < budget[0] < 10**9  # the first is cut to its share
    low_zero = get_balanced_memory(_net(), {0: 10**9, 1: None, "cpu": 10**9}, low_zero=True)
    assert low_zero[0] == 0  # GPU 1 holds everything


def test_integer_types_name_gpus():
    assert get_max_memory({np.int64(1): 5, torch.device("cpu"): 3}) == {1: 5, "cpu": 3}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (float("nan"), "NaN compares with no size"),
        ("10XB", "A size must be digits followed by a unit"),
        ("-1GB", "A size must be non-negative"),
        (1 + 2j, "got complex (1+2j)"),
        (torch.ones(2), "got Tensor"),
    ],
)
def test_what_no_budget_can_mean_is_refused_naming_the_entry(value, expected):
    with pytest.raises(DeviceMapError) as info:
        get_max_memory({"cpu": value})
    assert "max_memory['cpu'] is not a usable size" in str(info.value)
    assert expected in str(info.value)
    assert "'5GB'" in str(info.value)

"""A function that client code replaces on the reference's module path is the one accel's code
runs: transformers assigns ``accelerate.big_modeling.check_device_map`` for models whose map
leaves out some weights (``_no_placement_params``), and ``dispatch_model`` must obey it."""

from __future__ import annotations

from typing import Any

import accel_bigmodel
import pytest
from accel_bigmodel import DeviceMapError
from torch import nn

import accel
import accel.big_modeling


def _net() -> nn.Module:
    return nn.Sequential(nn.Linear(2, 2), nn.Linear(2, 2))


PARTIAL = {"0": "cpu"}  # leaves out the second layer


def test_a_replaced_check_is_obeyed_and_the_original_comes_back():
    original = accel.big_modeling.check_device_map
    calls: list[Any] = []
    accel.big_modeling.check_device_map = lambda model, device_map: calls.append(device_map)
    try:
        model = accel.dispatch_model(_net(), device_map=PARTIAL)
        assert calls == [PARTIAL]  # called as the reference calls it
        assert model.hf_device_map == PARTIAL
    finally:
        accel.big_modeling.check_device_map = original
    with pytest.raises(DeviceMapError, match="1.weight, 1.bias"):
        accel.dispatch_model(_net(), device_map=PARTIAL)


def test_monkeypatch_and_its_undo(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(accel.big_modeling, "check_device_map", lambda *args, **kwargs: None)
    accel_bigmodel.dispatch_model(_net(), device_map=PARTIAL)
    monkeypatch.undo()
    with pytest.raises(DeviceMapError):
        accel_bigmodel.dispatch_model(_net(), device_map=PARTIAL)


def test_deleting_the_replacement_restores_the_original():
    accel.big_modeling.check_device_map = lambda *args, **kwargs: None
    del accel.big_modeling.check_device_map
    assert accel.big_modeling.check_device_map is accel_bigmodel.check_device_map
    with pytest.raises(DeviceMapError):
        accel_bigmodel.dispatch_model(_net(), device_map=PARTIAL)


def test_devices_are_still_checked_under_a_replacement(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(accel.big_modeling, "check_device_map", lambda *args, **kwargs: None)
    with pytest.raises(DeviceMapError, match="device_map\\['0'\\]"):
        accel_bigmodel.dispatch_model(_net(), device_map={"0": "tpu", "1": "cpu"})

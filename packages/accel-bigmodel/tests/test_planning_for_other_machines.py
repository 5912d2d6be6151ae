"""A plan is not a placement: maps and budgets are computed for any machine, devices are checked
where weights move; ``get_max_memory`` converts the caller's sizes in place and
``infer_auto_device_map`` sends what the listed devices cannot hold to disk, as the reference does.
"""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from accel_bigmodel import (
    DeviceMapError,
    check_device_map,
    dispatch_model,
    get_balanced_memory,
    get_max_memory,
    infer_auto_device_map,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    load_checkpoint_in_model,
    write_safetensors,
)
from accel_bigmodel.placement._devices import accelerator_type

NO_GPU = accelerator_type() is None
needs_no_gpu = pytest.mark.skipif(not NO_GPU, reason="plans for GPUs this machine must lack")


class Stack(nn.Module):
    """Four 64x64 linear layers: 16,640 bytes each in float32, 66,560 in all."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(64, 64) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return x


def _empty() -> Stack:
    with init_empty_weights():
        return Stack()


@needs_no_gpu
def test_maps_are_planned_for_gpus_this_machine_lacks(caplog):
    # GPU 0 keeps room for the largest layer still to place (16,640 bytes): two layers fit.
    memory = {0: 50_000, 1: 50_000, "cpu": 10**9}
    with caplog.at_level(logging.WARNING, logger="accel_bigmodel"):
        device_map = infer_auto_device_map(_empty(), memory)
    assert set(device_map.values()) == {0, 1}
    assert "max_memory names GPU 0, 1, which this machine does not have" in caplog.text
    balanced = get_balanced_memory(_empty(), {0: 10**6, 1: 10**6, 2: 10**6})
    assert list(balanced) == [0, 1, 2] and balanced[0] < 10**6
    assert get_max_memory({3: "1KB"}) == {3: 1000}
    check_device_map(_empty(), {"layers.0": 5, "layers": "cpu"})


@needs_no_gpu
def test_devices_are_checked_where_weights_move(tmp_path):
    path = str(tmp_path / "model.safetensors")
    write_safetensors(path, {k: v.clone() for k, v in Stack().state_dict().items()})
    planned = {"layers.0": 0, "layers": "cpu"}
    for move in (
        lambda: dispatch_model(Stack(), planned),
        lambda: load_checkpoint_in_model(_empty(), path, device_map=planned),
        lambda: load_checkpoint_and_dispatch(_empty(), path, device_map=planned),
        lambda: load_checkpoint_and_dispatch(_empty(), path, "auto", max_memory={0: 10**6}),
    ):
        with pytest.raises(DeviceMapError, match="must be a device of this machine"):
            move()
    # the opt-in strictness of the planning functions
    with pytest.raises(DeviceMapError, match="The max_memory key 0 must be a device"):
        infer_auto_device_map(_empty(), {0: 10**6}, check_devices=True)
    with pytest.raises(DeviceMapError, match=r"device_map\['layers.0'\] must be a device"):
        check_device_map(_empty(), planned, check_devices=True)


def test_get_max_memory_converts_the_callers_dict_in_place():
    memory: dict = {"cpu": "60KB", "disk": "1GiB", 0: 5}
    result = get_max_memory(memory)
    assert memory == {"cpu": 60_000, "disk": 2**30, 0: 5}
    assert result == memory and list(result) == [0, "cpu", "disk"]
    assert result is not memory
    # a refused dict is left as it was
    bad: dict = {"cpu": "60KB", "disk": "10XB"}
    with pytest.raises(DeviceMapError, match="max_memory\\['disk'\\] is not a usable size"):
        get_max_memory(bad)
    assert bad == {"cpu": "60KB", "disk": "10XB"}


def test_infer_auto_device_map_converts_strings_through_to_the_caller():
    memory: dict = {"cpu": "200KB"}
    infer_auto_device_map(_empty(), memory)
    assert memory == {"cpu": 200_000}


def test_what_the_listed_devices_cannot_hold_goes_to_disk():
    device_map = infer_auto_device_map(_empty(), {"cpu": 40_000})
    assert _per_tensor(device_map) == {
        f"layers.{i}.{t}": "cpu" if i == 0 else "disk" for i in range(4) for t in ("weight", "bias")
    }
    # The model's one child keeps its own entry (a lone entry is not merged upwards).
    assert infer_auto_device_map(_empty(), {"cpu": 10**6}) == {"layers": "cpu"}
    with pytest.raises(ValueError, match="Every module must fit on a device of max_memory"):
        infer_auto_device_map(_empty(), {"cpu": 40_000}, offload_to_disk=False)


def test_same_maps_as_the_reference_for_disk_and_in_place_sizes():
    # A differential test: the reference is in the workspace's bench group, not in the
    # package's own test dependencies (the minimal install skips it; the workspace runs it).
    pytest.importorskip("accelerate", reason="the reference library (bench group) is absent")
    from accelerate.utils import get_max_memory as reference_get_max_memory
    from accelerate.utils import infer_auto_device_map as reference_infer

    for memory in ({"cpu": "60KB", "disk": "1GB"}, {"cpu": 100, "disk": "2KiB"}):
        ours, theirs = dict(memory), dict(memory)
        assert get_max_memory(ours) == reference_get_max_memory(theirs)
        assert ours == theirs
    for budget in ({"cpu": 40_000}, {"cpu": 60_000}, {"cpu": 10**6}):
        ours_map = infer_auto_device_map(_empty(), dict(budget))
        theirs_map = reference_infer(_empty(), dict(budget))
        assert _per_tensor(ours_map) == _per_tensor(theirs_map), (ours_map, theirs_map)


def _per_tensor(device_map: dict) -> dict[str, object]:
    """The device of every tensor of the model (maps may group modules differently)."""
    result = {}
    for name in Stack().state_dict():
        node = name
        while node not in device_map:
            node = node.rsplit(".", 1)[0] if "." in node else ""
        result[name] = device_map[node]
    return result

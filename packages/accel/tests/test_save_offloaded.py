"""save_model / get_state_dict of models whose weights were offloaded to the CPU or disk by
dispatch_model, load_checkpoint_and_dispatch and cpu_offload: the weights are read back from
their offload storage and the checkpoint loads strictly into a plain model."""

from __future__ import annotations

import os

import pytest
import torch
from accel_bigmodel import cpu_offload, dispatch_model, load_checkpoint_and_dispatch
from safetensors.torch import load_file, save_file
from torch import nn

from accel import Accelerator


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.full((2,), 3.0))
        self.first = nn.Linear(4, 4)
        self.block = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 2))
        self.register_buffer("offset", torch.arange(2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.block(self.first(x)) * self.scale + self.offset


def _expected() -> tuple[Net, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = Net()
    return model, {k: v.clone() for k, v in model.state_dict().items()}


def _check_saved(accelerator: Accelerator, model: nn.Module, expected: dict, out: str) -> None:
    state = accelerator.get_state_dict(model)
    assert sorted(state) == sorted(expected)
    assert all(torch.equal(state[k], expected[k]) for k in expected)
    accelerator.save_model(model, out)
    plain = Net()
    plain.load_state_dict(load_file(os.path.join(out, "model.safetensors")), strict=True)
    assert all(torch.equal(plain.state_dict()[k], expected[k]) for k in expected)


DISK_MAPS = [
    {"scale": "cpu", "offset": "cpu", "first": "cpu", "block": "disk"},
    {
        "scale": "cpu",
        "offset": "cpu",
        "first": "disk",
        "block.0": "cpu",
        "block.1": "cpu",
        "block.2": "disk",
    },
]


@pytest.mark.parametrize("device_map", DISK_MAPS, ids=["block", "mixed"])
def test_dispatch_model_with_disk_offload(tmp_path, device_map):
    model, expected = _expected()
    dispatch_model(model, device_map, main_device="cpu", offload_dir=str(tmp_path / "off"))
    assert any(t.device.type == "meta" for t in model.state_dict().values())
    _check_saved(Accelerator(cpu=True), model, expected, str(tmp_path / "saved"))


def test_load_checkpoint_and_dispatch_with_disk_offload(tmp_path):
    _, expected = _expected()
    save_file(expected, str(tmp_path / "model.safetensors"))
    with torch.device("meta"):
        model = Net()
    model = load_checkpoint_and_dispatch(
        model,
        str(tmp_path / "model.safetensors"),
        device_map=DISK_MAPS[1],
        offload_folder=str(tmp_path / "off"),
    )
    _check_saved(Accelerator(cpu=True), model, expected, str(tmp_path / "saved"))


def test_cpu_offload(tmp_path):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    cpu_offload(model, execution_device=torch.device("cpu"))
    assert all(t.device.type == "meta" for t in model.state_dict().values())
    accelerator = Accelerator(cpu=True)
    state = accelerator.get_state_dict(model)
    assert sorted(state) == sorted(expected)
    assert all(torch.equal(state[k], expected[k]) for k in expected)
    accelerator.save_model(model, str(tmp_path))
    saved = load_file(str(tmp_path / "model.safetensors"))
    plain = nn.Sequential(nn.Linear(4, 4), nn.Sequential(nn.ReLU(), nn.Linear(4, 2)))
    plain.load_state_dict(saved, strict=True)


def test_plain_model_state_is_unchanged():
    model, expected = _expected()
    state = Accelerator(cpu=True).get_state_dict(model)
    assert list(state) == list(expected)

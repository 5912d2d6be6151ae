"""load_checkpoint_in_model reads both forms of a sharded-checkpoint index (with and without
the ``weight_map`` wrapper) and reports checkpoint tensors that are not in the model's state
dict (including non-persistent buffers) as unexpected, without loading them."""

from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import save_file
from torch import nn

from accel_bigmodel import load_checkpoint_in_model


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(3, 3)
        self.b = nn.Linear(3, 1)
        self.register_buffer("scratch", torch.zeros(2), persistent=False)


def _shards(tmp_path) -> tuple[dict[str, torch.Tensor], dict[str, str]]:
    torch.manual_seed(0)
    state = {k: v.clone() for k, v in Net().state_dict().items()}
    save_file({k: state[k] for k in ("a.weight", "a.bias")}, str(tmp_path / "s1.safetensors"))
    save_file({k: state[k] for k in ("b.weight", "b.bias")}, str(tmp_path / "s2.safetensors"))
    weight_map = {k: "s1.safetensors" if k.startswith("a.") else "s2.safetensors" for k in state}
    return state, weight_map


@pytest.mark.parametrize("wrapped", [True, False])
def test_index_with_or_without_weight_map_wrapper(tmp_path, wrapped):
    state, weight_map = _shards(tmp_path)
    index = {"metadata": {}, "weight_map": weight_map} if wrapped else weight_map
    (tmp_path / "index.json").write_text(json.dumps(index))
    model = Net()
    load_checkpoint_in_model(model, str(tmp_path / "index.json"))
    assert all(torch.equal(model.state_dict()[k], v) for k, v in state.items())


@pytest.mark.parametrize("index", [{"metadata": {"x": 1}}, {"a.weight": 3}, [], {}])
def test_index_of_another_shape_is_refused(tmp_path, index):
    _shards(tmp_path)
    (tmp_path / "index.json").write_text(json.dumps(index))
    with pytest.raises(ValueError, match="weight_map"):
        load_checkpoint_in_model(Net(), str(tmp_path / "index.json"))


def test_non_persistent_buffer_in_checkpoint_is_unexpected_and_not_loaded(tmp_path):
    torch.manual_seed(0)
    state = dict(Net().state_dict()) | {"scratch": torch.ones(2)}
    save_file(state, str(tmp_path / "model.safetensors"))
    model = Net()
    load_checkpoint_in_model(model, str(tmp_path / "model.safetensors"), strict=False)
    assert model._accel_load_report.unexpected_keys == ["scratch"]
    assert torch.equal(model.scratch, torch.zeros(2))
    with pytest.raises(ValueError, match="scratch"):
        load_checkpoint_in_model(Net(), str(tmp_path / "model.safetensors"), strict=True)

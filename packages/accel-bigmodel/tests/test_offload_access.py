"""Reading offloaded weights back: has_offloaded_params, align_module_device, state dicts."""

from __future__ import annotations

import logging

import pytest
import torch
from torch import nn

from accel_bigmodel import (
    align_module_device,
    compute_module_sizes,
    compute_module_total_buffer_size,
    cpu_offload,
    get_module_size_with_ties,
    get_non_persistent_buffers,
    get_state_dict_from_offload,
    get_state_dict_offloaded_model,
    has_offloaded_params,
    init_empty_weights,
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(3, 4)
        self.second = nn.Linear(4, 2)
        self.register_buffer("scale", torch.ones(2))
        self.register_buffer("mask", torch.zeros(5), persistent=False)
        self.second.register_buffer("step", torch.zeros(1, dtype=torch.int64), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x)) * self.scale


def _offloaded() -> tuple[Net, dict[str, torch.Tensor]]:
    torch.manual_seed(0)
    model = Net()
    expected = {k: v.clone() for k, v in model.state_dict().items()}
    cpu_offload(model, execution_device="cpu")
    return model, expected


def test_offloaded_modules_are_detected_and_aligned():
    model, expected = _offloaded()
    assert has_offloaded_params(model.first) and not has_offloaded_params(nn.Linear(1, 1))
    assert model.first.weight.device.type == "meta"
    with align_module_device(model.first):
        assert torch.equal(model.first.weight, expected["first.weight"])
    assert model.first.weight.device.type == "meta"
    with align_module_device(model.first, "cpu"):
        assert model.first.weight.device.type == "cpu"
    assert model.first._hf_hook.execution_device == "cpu"


def test_align_module_device_on_a_plain_module_keeps_its_weights():
    # One CPU here: the move is CPU to CPU (a real device round trip needs an accelerator).
    layer = nn.Linear(2, 2)
    before = layer.weight.detach().clone()
    with align_module_device(layer, "cpu"):
        assert layer.weight.device.type == "cpu" and torch.equal(layer.weight, before)
    with align_module_device(layer):
        assert torch.equal(layer.weight, before)
    with init_empty_weights():
        empty = nn.Linear(2, 2)
    with align_module_device(empty, "meta"):
        assert empty.weight.device.type == "meta"


def test_state_dict_of_an_offloaded_model_matches_the_original():
    model, expected = _offloaded()
    state = get_state_dict_offloaded_model(model)
    assert state.keys() == {"first.weight", "first.bias", "second.weight", "second.bias"}
    for key, value in state.items():
        assert value.device.type == "cpu" and torch.equal(value, expected[key]), key
    out = get_state_dict_from_offload(
        model.second, "second.weight", {"second.weight": None, "second.bias": None, "x": 1}
    )
    assert torch.equal(out["second.weight"], expected["second.weight"]) and out["x"] == 1


def test_meta_placeholders_are_left_out_with_a_warning(caplog):
    with init_empty_weights():
        model = nn.Sequential(nn.Linear(2, 2))
    with caplog.at_level(logging.WARNING):
        assert get_state_dict_offloaded_model(model) == {}
    assert "0.weight" in caplog.text


def test_buffer_sizes_and_non_persistent_buffers():
    model = Net()
    assert compute_module_total_buffer_size(model) == 2 * 4 + 5 * 4 + 8
    assert compute_module_total_buffer_size(model, dtype=torch.float16) == 2 * 2 + 5 * 2 + 8
    assert get_non_persistent_buffers(model) == {"mask"}
    assert get_non_persistent_buffers(model, recurse=True) == {"mask", "step"}
    assert get_non_persistent_buffers(model, recurse=True, fqns=True) == {"mask", "second.step"}


def test_module_size_with_ties_counts_a_tied_weight_once():
    model = nn.Sequential(nn.Embedding(10, 4), nn.Linear(4, 10, bias=False))
    model[1].weight = model[0].weight
    sizes = compute_module_sizes(model)
    modules = list(model.named_children())
    size, names, found = get_module_size_with_ties(["1.weight"], sizes["0"], sizes, modules)
    assert (names, found) == (["1"], [model[1]])
    assert size == sizes["0"] + sizes["1"] - sizes["1.weight"]
    assert get_module_size_with_ties([], 7, sizes, modules) == (7, [], [])
    with pytest.raises(ValueError, match="'2.weight' belongs to none"):
        get_module_size_with_ties(["2.weight"], 7, sizes, modules)


def test_tensor_identity_devices_and_byte_counts():
    from accel_bigmodel import check_device_same, convert_bytes, id_tensor_storage

    base = torch.zeros(4, 4)
    assert id_tensor_storage(base) == id_tensor_storage(base[1])
    assert id_tensor_storage(base) != id_tensor_storage(base.clone())
    assert id_tensor_storage(base)[2] == 64
    assert id_tensor_storage(torch.empty(3, device="meta", dtype=torch.float16))[1:] == (0, 6)
    assert check_device_same(torch.device("cuda"), torch.device("cuda:0"))
    assert not check_device_same(torch.device("cuda:1"), torch.device("cuda"))
    assert not check_device_same(torch.device("cpu"), torch.device("meta"))
    assert convert_bytes(512) == "512 bytes"
    assert convert_bytes(1536) == "1.5 KB"
    assert convert_bytes(3 * 1024**3) == "3.0 GB"
    assert convert_bytes(2 * 1024**5) == "2.0 PB"

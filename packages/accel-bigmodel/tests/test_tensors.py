import pytest
import torch
from bigmodel_helpers import TinyLM
from torch import nn

from accel_bigmodel import (
    find_tied_parameters,
    init_empty_weights,
    retie_parameters,
    set_module_tensor_to_device,
    shard_checkpoint,
)


def test_set_module_tensor_to_device_from_meta():
    with init_empty_weights():
        model = TinyLM()
    value = torch.randn(32, 16)
    set_module_tensor_to_device(model, "blocks.0.up.weight", "cpu", value=value)
    param = model.blocks[0].up.weight
    assert isinstance(param, nn.Parameter) and param.requires_grad
    assert torch.equal(param, value)
    set_module_tensor_to_device(
        model, "blocks.0.up.weight", "cpu", value=value, dtype=torch.float16
    )
    assert model.blocks[0].up.weight.dtype == torch.float16
    set_module_tensor_to_device(model, "scale", "meta")
    assert model.scale.device.type == "meta"


def test_set_module_tensor_value_cast_to_existing_dtype():
    layer = nn.Linear(2, 2)
    set_module_tensor_to_device(layer, "weight", "cpu", value=torch.ones(2, 2, dtype=torch.float64))
    assert layer.weight.dtype == torch.float32


def test_set_module_tensor_errors():
    layer = nn.Linear(2, 2)
    with pytest.raises(ValueError, match="shape"):
        set_module_tensor_to_device(layer, "weight", "cpu", value=torch.ones(3, 2))
    with pytest.raises(ValueError, match="'nothere'"):
        set_module_tensor_to_device(layer, "nothere", "cpu")
    with pytest.raises(ValueError, match="no submodule 'x'"):
        set_module_tensor_to_device(layer, "x.weight", "cpu")


def test_tied_params_map_shares_placed_weights():
    model = TinyLM()
    ptr = model.embed.weight.data_ptr()
    tied = {ptr: {}}
    set_module_tensor_to_device(
        model, "embed.weight", "cpu", value=model.embed.weight.detach(), tied_params_map=tied
    )
    assert torch.device("cpu") in tied[ptr]
    set_module_tensor_to_device(
        model, "head.weight", "cpu", value=model.embed.weight.detach(), tied_params_map=tied
    )
    assert model.head.weight is tied[ptr][torch.device("cpu")]


def test_find_and_retie_parameters():
    model = TinyLM()
    assert find_tied_parameters(model) == [["embed.weight", "head.weight"]]
    assert find_tied_parameters(TinyLM(tie=False)) == []
    model.head.weight = nn.Parameter(model.head.weight.detach().clone())
    assert find_tied_parameters(model) == []
    retie_parameters(model, [["embed.weight", "head.weight"]])
    assert model.head.weight is model.embed.weight


def test_shard_checkpoint_greedy_as_documented():
    gb = 10  # 1 "GB" = 10 float32 elements = 40 bytes
    state = {f"w{i}": torch.zeros(n * gb) for i, n in enumerate([6, 6, 2, 6, 2, 2])}
    shards, index = shard_checkpoint(state, max_shard_size=10 * gb * 4)
    groups = [sorted(s) for s in shards.values()]
    assert groups == [["w0"], ["w1", "w2"], ["w3", "w4", "w5"]]
    assert list(shards) == [
        "pytorch_model-00001-of-00003.bin",
        "pytorch_model-00002-of-00003.bin",
        "pytorch_model-00003-of-00003.bin",
    ]
    assert index["metadata"]["total_size"] == 24 * gb * 4
    assert index["weight_map"]["w4"] == "pytorch_model-00003-of-00003.bin"


def test_shard_checkpoint_single_and_oversized_and_tied():
    state = {"a": torch.zeros(4)}
    assert shard_checkpoint(state) == ({"pytorch_model.bin": state}, None)
    big = {"a": torch.zeros(100), "b": torch.zeros(1)}
    shards, _ = shard_checkpoint(big, max_shard_size=40, weights_name="model.safetensors")
    assert list(shards) == ["model-00001-of-00002.safetensors", "model-00002-of-00002.safetensors"]
    shared = torch.zeros(10)
    shards, index = shard_checkpoint(
        {"x": shared, "y": torch.zeros(10), "z": shared}, max_shard_size=50
    )
    assert index["weight_map"]["x"] == index["weight_map"]["z"]
    with pytest.raises(ValueError, match="size"):
        shard_checkpoint(state, max_shard_size="lots")

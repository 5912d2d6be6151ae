import json
import zlib

import pytest
import torch
from bigmodel_helpers import TinyLM

from accel_bigmodel import (
    OffloadedWeightsLoader,
    PrefixedDataset,
    disk_offload,
    extract_submodules_state_dict,
    init_empty_weights,
    load_offloaded_weight,
    load_offloaded_weights,
    offload_state_dict,
    offload_weight,
    save_offload_index,
)


def test_offload_weight_roundtrip_all_dtypes(tmp_path):
    index = {}
    tensors = {
        "f32": torch.randn(3, 4),
        "bf16": torch.randn(5, dtype=torch.bfloat16),
        "i64": torch.arange(6),
        "scalar": torch.tensor(2.5),
    }
    for name, tensor in tensors.items():
        index = offload_weight(tensor, name, tmp_path, index=index)
    assert index["bf16"] == {
        "dtype": "bfloat16",
        "shape": [5],
        "crc32": zlib.crc32((tmp_path / "bf16.dat").read_bytes()),
    }
    for name, tensor in tensors.items():
        loaded = load_offloaded_weight(tmp_path / f"{name}.dat", index[name])
        assert torch.equal(loaded.reshape(tensor.shape), tensor)


def test_stale_dat_file_is_a_clear_error(tmp_path):
    index = offload_weight(torch.zeros(4), "w", tmp_path)
    with pytest.raises(ValueError, match="stale or corrupted"):
        load_offloaded_weight(tmp_path / "w.dat", {"dtype": "float32", "shape": [8]})
    assert index


def test_offload_state_dict_and_loader(tmp_path):
    state = {"a.weight": torch.randn(2, 2), "b.bias": torch.randn(3)}
    offload_state_dict(tmp_path, state)
    index = json.loads((tmp_path / "index.json").read_text())
    assert set(index) == set(state)
    loader = OffloadedWeightsLoader(state_dict={"c": torch.ones(1)}, save_folder=tmp_path)
    assert set(loader) == {"c", "a.weight", "b.bias"} and len(loader) == 3
    assert torch.equal(loader["a.weight"], state["a.weight"])
    # Each lookup reads into new memory: no tensor is backed by a map of the file.
    assert loader["a.weight"].data_ptr() != loader["a.weight"].data_ptr()
    with pytest.raises(KeyError, match="offload index"):
        loader["zzz"]
    prefixed = PrefixedDataset(loader, "a.")
    assert list(prefixed) == ["weight"] and "weight" in prefixed
    assert torch.equal(prefixed["weight"], state["a.weight"])


def test_loader_requires_some_weights():
    with pytest.raises(ValueError, match="state_dict"):
        OffloadedWeightsLoader()


def test_save_offload_index_merges(tmp_path):
    save_offload_index({"a": {"dtype": "float32", "shape": [1]}}, tmp_path)
    save_offload_index({"b": {"dtype": "float32", "shape": [2]}}, tmp_path)
    assert set(json.loads((tmp_path / "index.json").read_text())) == {"a", "b"}


def test_load_offloaded_weights_into_model(tmp_path):
    source = TinyLM()
    state = extract_submodules_state_dict(source.state_dict(), ["blocks.0"])
    assert set(state) == {k for k in source.state_dict() if k.startswith("blocks.0.")}
    offload_state_dict(tmp_path, state)
    with init_empty_weights():
        model = TinyLM()
    index = json.loads((tmp_path / "index.json").read_text())
    load_offloaded_weights(model, index, tmp_path)
    assert torch.equal(model.blocks[0].up.weight, source.blocks[0].up.weight)


@torch.no_grad()
def test_disk_offload_runs_from_memory_mapped_safetensors(tiny, ids, tmp_path):
    model = TinyLM()
    model.load_state_dict(tiny.state_dict())
    disk_offload(model, tmp_path / "off", execution_device="cpu")
    assert all(p.device.type == "meta" for p in model.parameters())
    assert (tmp_path / "off" / "model-offload.safetensors").is_file()
    torch.testing.assert_close(model(ids), tiny(ids))
    torch.testing.assert_close(model(ids), tiny(ids))

import json
import logging
import os

import pytest
import torch
from accel_bigmodel import load_checkpoint_in_model
from safetensors.torch import load_file

import accel.utils
from accel import Accelerator


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(64, 16)
        self.body = torch.nn.Linear(16, 16)
        self.head = torch.nn.Linear(16, 64, bias=False)
        self.head.weight = self.embed.weight


def _same(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


def test_save_model_shards_with_index_and_keeps_ties(tmp_path):
    acc = Accelerator()
    model = acc.prepare(Tied())
    # embed 4096 B, body 1088 B: a 5000-byte limit gives two shards.
    acc.save_model(model, tmp_path, max_shard_size=5000)
    index = json.loads((tmp_path / "model.safetensors.index.json").read_text())
    assert sorted(set(index["weight_map"].values())) == [
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
    ]
    assert "head.weight" not in index["weight_map"]  # tied: stored once
    assert index["metadata"]["total_size"] == (64 * 16 + 16 * 16 + 16) * 4

    fresh = Tied()
    load_checkpoint_in_model(fresh, str(tmp_path))
    assert fresh.head.weight is fresh.embed.weight
    assert _same(fresh, model)

    acc.save_model(model, tmp_path)  # one file now: the shards and index of before go away
    assert sorted(os.listdir(tmp_path)) == ["model.safetensors"]
    assert set(load_file(tmp_path / "model.safetensors")) == {
        "embed.weight",
        "body.weight",
        "body.bias",
    }


def test_save_model_torch_format(tmp_path):
    acc = Accelerator()
    model = acc.prepare(torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)))
    acc.save_model(model, tmp_path, max_shard_size=300, safe_serialization=False)
    names = sorted(os.listdir(tmp_path))
    assert names == [
        "pytorch_model-00001-of-00002.bin",
        "pytorch_model-00002-of-00002.bin",
        "pytorch_model.bin.index.json",
    ]
    fresh = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.Linear(8, 8))
    load_checkpoint_in_model(fresh, str(tmp_path))
    assert _same(fresh, model)
    with pytest.raises(NotADirectoryError, match="is a file"):
        acc.save_model(model, tmp_path / "pytorch_model.bin.index.json")


def test_shard_checkpoint_greedy_in_key_order():
    gb = {f"w{i}": torch.empty(n, dtype=torch.uint8) for i, n in enumerate([6, 6, 2, 6, 2, 2])}
    shards, index = accel.utils.shard_checkpoint(gb, max_shard_size=10)
    assert [list(s) for s in shards.values()] == [["w0"], ["w1", "w2"], ["w3", "w4", "w5"]]
    assert index["metadata"]["total_size"] == 24


def test_get_state_dict_and_save(tmp_path):
    acc = Accelerator()
    model = acc.prepare(torch.nn.Linear(3, 2))
    state = acc.get_state_dict(model)
    assert set(state) == {"weight", "bias"}
    assert set(acc.get_state_dict(model, unwrap=False)) == {"weight", "bias"}

    acc.save(state, tmp_path / "w.safetensors", safe_serialization=True)
    assert torch.equal(load_file(tmp_path / "w.safetensors")["weight"], model.weight)
    acc.save([0, 1, 2], tmp_path / "array.pkl")
    assert torch.load(tmp_path / "array.pkl", weights_only=True) == [0, 1, 2]
    assert sorted(os.listdir(tmp_path)) == ["array.pkl", "w.safetensors"]
    with pytest.raises(TypeError, match="dict of tensors"):
        accel.utils.save([1], tmp_path / "x.safetensors", safe_serialization=True)


def test_constants_at_utils():
    u = accel.utils
    assert (u.MODEL_NAME, u.OPTIMIZER_NAME, u.RNG_STATE_NAME) == (
        "pytorch_model",
        "optimizer",
        "random_states",
    )
    assert (u.SCALER_NAME, u.SCHEDULER_NAME) == ("scaler.pt", "scheduler")
    assert (u.WEIGHTS_NAME, u.SAFE_WEIGHTS_NAME) == ("pytorch_model.bin", "model.safetensors")
    assert u.WEIGHTS_INDEX_NAME == "pytorch_model.bin.index.json"
    assert u.SAFE_WEIGHTS_INDEX_NAME == "model.safetensors.index.json"
    assert u.ProjectConfiguration(project_dir="p").logging_dir == "p"


class _SharedLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(3, 3)
        self.b = self.a


def test_save_with_safetensors_warns_about_shared_tensors(tmp_path, caplog):
    state = _SharedLayers().state_dict()
    path = tmp_path / "model.safetensors"
    with caplog.at_level(logging.WARNING):
        accel.utils.save(state, path, safe_serialization=True)
    warnings = [r for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    text = warnings[0].getMessage()
    assert text.startswith("Removed shared tensor") and "b.weight" in text and "b.bias" in text
    assert "'b.weight': 'a.weight'" in text  # names what each removed tensor shares memory with
    assert set(load_file(path)) == {"a.weight", "a.bias"}
    caplog.clear()
    with caplog.at_level(logging.WARNING):
        accel.utils.save({"w": torch.ones(2)}, tmp_path / "w.safetensors", safe_serialization=True)
    assert not caplog.records

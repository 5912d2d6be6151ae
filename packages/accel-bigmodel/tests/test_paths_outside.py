"""Paths that a checkpoint's own files name stay inside its folder: an index's ``weight_map``
and an offload ``index.json`` that point elsewhere are refused, naming the entry."""

import json

import pytest
import torch
from safetensors.torch import save_file

from accel_bigmodel import (
    OffloadedWeightsLoader,
    PathOutsideCheckpointError,
    load_checkpoint_in_model,
)


def _outside(tmp_path):
    save_file({"weight": torch.full((2, 2), 7.0)}, str(tmp_path / "outside.safetensors"))
    folder = tmp_path / "ckpt"
    folder.mkdir()
    return folder


@pytest.mark.parametrize(
    "shard", ["../outside.safetensors", "ABSOLUTE", "a/../../outside.safetensors"]
)
def test_weight_map_outside_the_folder_is_refused(tmp_path, shard):
    folder = _outside(tmp_path)
    if shard == "ABSOLUTE":
        shard = str(tmp_path / "outside.safetensors")
    index = {"metadata": {}, "weight_map": {"weight": shard}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    model = torch.nn.Linear(2, 2, bias=False)
    before = model.weight.detach().clone()
    with pytest.raises(PathOutsideCheckpointError) as caught:
        load_checkpoint_in_model(model, str(folder))
    assert "'weight'" in str(caught.value) and repr(shard) in str(caught.value)
    assert caught.value.entry == "weight" and caught.value.target == shard
    assert torch.equal(model.weight, before)


def test_weight_map_inside_the_folder_still_loads(tmp_path):
    folder = _outside(tmp_path)
    (folder / "shards").mkdir()
    save_file({"weight": torch.ones(2, 2)}, str(folder / "shards" / "a.safetensors"))
    index = {"weight_map": {"weight": "shards/a.safetensors"}}
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    model = torch.nn.Linear(2, 2, bias=False)
    load_checkpoint_in_model(model, str(folder))
    assert torch.equal(model.weight, torch.ones(2, 2))


@pytest.mark.parametrize(
    ("path", "allowed"),
    [("../outside.safetensors", False), ("ABSOLUTE", True), ("/etc/passwd", False)],
)
def test_offload_index_reads_outside_only_a_checkpoint_used_in_place(tmp_path, path, allowed):
    folder = _outside(tmp_path)
    if path == "ABSOLUTE":
        path = str(tmp_path / "outside.safetensors")  # the form written for in-place weights
    entry = {"safetensors_file": path, "weight_name": "weight", "dtype": "float32"}
    (folder / "index.json").write_text(json.dumps({"weight": {**entry, "shape": [2, 2]}}))
    if allowed:
        loader = OffloadedWeightsLoader(save_folder=str(folder))
        assert torch.equal(loader["weight"], torch.full((2, 2), 7.0))
        return
    with pytest.raises(PathOutsideCheckpointError, match="'weight'"):
        OffloadedWeightsLoader(save_folder=str(folder))


def test_an_offloaded_dat_file_that_links_outside_the_folder_is_refused(tmp_path):
    from accel_bigmodel import offload_state_dict

    folder = tmp_path / "offload"
    offload_state_dict(str(folder), {"weight": torch.zeros(2, 2)})
    secret = tmp_path / "secret.bin"
    secret.write_bytes(torch.full((2, 2), 7.0).numpy().tobytes())  # the size the index expects
    (folder / "weight.dat").unlink()
    (folder / "weight.dat").symlink_to(secret)
    loader = OffloadedWeightsLoader(save_folder=str(folder))
    with pytest.raises(PathOutsideCheckpointError, match="'weight'"):
        loader["weight"]
    # A link that stays inside the folder still reads.
    (folder / "kept.bin").write_bytes(torch.zeros(2, 2).numpy().tobytes())
    (folder / "weight.dat").unlink()
    (folder / "weight.dat").symlink_to(folder / "kept.bin")
    loader = OffloadedWeightsLoader(save_folder=str(folder))
    assert torch.equal(loader["weight"], torch.zeros(2, 2))

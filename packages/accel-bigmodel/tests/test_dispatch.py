import os

import pytest
import torch
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import (
    compute_module_sizes,
    dispatch_model,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    remove_hook_from_submodules,
)


def _empty():
    with init_empty_weights():
        return TinyLM()


@torch.no_grad()
def test_auto_all_in_ram(tiny, ids, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    model = load_checkpoint_and_dispatch(
        _empty(), folder, device_map="auto", no_split_module_classes=["Block"]
    )
    assert model.hf_device_map == {"": "cpu"}
    torch.testing.assert_close(model(ids), tiny(ids))


@pytest.mark.parametrize("strategy", ["auto", "balanced", "balanced_low_0", "sequential"])
@torch.no_grad()
def test_half_on_disk_matches_and_ties_survive(tiny, ids, tmp_path, strategy):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    model = _empty()
    half = compute_module_sizes(model)[""] // 2
    model = load_checkpoint_and_dispatch(
        model,
        folder,
        device_map=strategy,
        max_memory={"cpu": half, "disk": "1GB"},
        no_split_module_classes=["Block"],
        offload_folder=tmp_path / "offload",
    )
    assert "disk" in model.hf_device_map.values()
    assert model.head.weight is model.embed.weight
    expected = tiny(ids)
    for _ in range(3):  # repeated calls exercise the prefetch ring
        torch.testing.assert_close(model(ids), expected)
    prefetcher = model._accel_prefetcher
    assert prefetcher.hits > 0


@torch.no_grad()
def test_tied_weights_both_on_disk(tiny, ids, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    device_map = {"embed": "disk", "blocks": "cpu", "scale": "cpu", "head": "disk"}
    model = load_checkpoint_and_dispatch(
        _empty(), folder, device_map=device_map, offload_folder=tmp_path / "off"
    )
    torch.testing.assert_close(model(ids), tiny(ids))


@torch.no_grad()
def test_dispatch_writes_disk_weights_once(tiny, ids, tmp_path):
    model = TinyLM()
    model.load_state_dict(tiny.state_dict())
    offload = tmp_path / "offload"
    device_map = {
        "embed": "cpu",
        "blocks.0": "cpu",
        "blocks.1": "disk",
        "blocks.2": "disk",
        "blocks.3": "cpu",
        "head": "cpu",
        "scale": "cpu",
    }
    dispatch_model(model, device_map, offload_dir=offload)
    files = sorted(os.listdir(offload))
    assert files == ["dispatch-00000.safetensors", "index.json"]
    assert model.blocks[1].up.weight.device.type == "meta"
    torch.testing.assert_close(model(ids), tiny(ids))
    mtime = os.path.getmtime(offload / "dispatch-00000.safetensors")
    torch.testing.assert_close(model(ids), tiny(ids))
    assert os.path.getmtime(offload / "dispatch-00000.safetensors") == mtime


def test_dispatch_errors(tiny, tmp_path):
    model = TinyLM()
    with pytest.raises(ValueError, match="offload_dir"):
        dispatch_model(model, {"": "cpu", "blocks": "disk"})
    with pytest.warns(UserWarning, match="'nope'"):  # every tensor still covered by ""
        dispatch_model(model, {"": "cpu", "nope": "cpu"})
    with pytest.raises(ValueError, match="no device|none"):
        dispatch_model(TinyLM(), {"embed": "cpu"})
    with pytest.raises(ValueError, match="device_map"):
        load_checkpoint_and_dispatch(
            _empty(), save_safetensors_checkpoint(tiny, tmp_path / "c"), device_map="fastest"
        )


@torch.no_grad()
def test_moving_an_offloaded_model_is_refused(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    model = load_checkpoint_and_dispatch(
        _empty(), folder, device_map={"": "cpu", "blocks": "disk"}, offload_folder=tmp_path / "o"
    )
    with pytest.raises(RuntimeError, match="offloaded"):
        model.to("cpu")


@torch.no_grad()
def test_single_device_map_moves_model_and_hooks_can_be_removed(tiny, ids):
    model = TinyLM()
    model.load_state_dict(tiny.state_dict())
    dispatch_model(model, {"": "cpu"}, force_hooks=True)
    assert hasattr(model, "_hf_hook")
    torch.testing.assert_close(model(ids), tiny(ids))
    remove_hook_from_submodules(model)
    assert not hasattr(model, "_hf_hook")


@torch.no_grad()
def test_whole_model_on_disk_runs_on_cpu(tiny, ids, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    model = load_checkpoint_and_dispatch(
        _empty(),
        folder,
        device_map={"": "disk"},
        offload_folder=tmp_path / "o",
        offload_buffers=True,
    )
    torch.testing.assert_close(model(ids), tiny(ids))


@torch.no_grad()
def test_dtype_applies_to_disk_offloaded_modules(ids, tmp_path):
    """``dtype=`` casts the weights of modules mapped to the disk too: their forward must not
    see weights cast back to the meta model's float32 next to bf16 activations."""
    from safetensors.torch import save_file

    from accel_bigmodel import init_empty_weights, load_checkpoint_and_dispatch

    torch.manual_seed(0)
    tiny = TinyLM(tie=False).eval()
    folder = tmp_path / "bf16"
    folder.mkdir()
    state = {k: v.to(torch.bfloat16).contiguous() for k, v in tiny.state_dict().items()}
    save_file(state, folder / "model.safetensors")
    with init_empty_weights():
        model = TinyLM(tie=False)
    device_map = {"embed": "cpu", "blocks.0": "cpu", "blocks.1": "cpu", "head": "cpu"}
    device_map.update({"blocks.2": "disk", "blocks.3": "disk", "scale": "cpu"})
    model = load_checkpoint_and_dispatch(
        model, folder, device_map=device_map, offload_folder=tmp_path / "off", dtype=torch.bfloat16
    )
    assert {p.dtype for p in model.parameters()} == {torch.bfloat16}
    expected = tiny.to(torch.bfloat16)(ids)
    torch.testing.assert_close(model(ids), expected)

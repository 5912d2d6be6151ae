import json
import os

import pytest
import torch
from bigmodel_helpers import (
    TinyLM,
    checkpoint_state,
    save_bin_checkpoint,
    save_safetensors_checkpoint,
)

from accel_bigmodel import (
    SAFE_WEIGHTS_INDEX_NAME,
    SAFE_WEIGHTS_NAME,
    WEIGHTS_INDEX_NAME,
    WEIGHTS_NAME,
    CorruptSafetensorsError,
    init_empty_weights,
    load_checkpoint_in_model,
    load_state_dict,
    write_safetensors,
)


def _empty(**kwargs):
    with init_empty_weights():
        return TinyLM(**kwargs)


def _assert_same_weights(model, reference):
    for name, tensor in reference.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, msg=name)


def test_constants():
    assert WEIGHTS_NAME == "pytorch_model.bin"
    assert SAFE_WEIGHTS_NAME == "model.safetensors"
    assert WEIGHTS_INDEX_NAME == "pytorch_model.bin.index.json"
    assert SAFE_WEIGHTS_INDEX_NAME == "model.safetensors.index.json"


def test_single_safetensors_file(tiny, tmp_path):
    path = tmp_path / "weights.safetensors"
    write_safetensors(str(path), checkpoint_state(tiny))
    model = _empty()
    load_checkpoint_in_model(model, str(path))
    _assert_same_weights(model, tiny)
    assert model.head.weight is model.embed.weight
    report = model._accel_load_report
    assert report.missing_keys == [] and report.unexpected_keys == []


def test_index_json_and_folder_with_index(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt", max_shard_size="4KB")
    assert os.path.isfile(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME))
    for checkpoint in (os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME), folder):
        model = _empty()
        load_checkpoint_in_model(model, checkpoint)
        _assert_same_weights(model, tiny)


def test_folder_with_single_file(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "one", max_shard_size="1GB")
    assert os.listdir(folder) == [SAFE_WEIGHTS_NAME]
    model = _empty()
    load_checkpoint_in_model(model, folder)
    _assert_same_weights(model, tiny)


def test_torch_pickles_single_and_sharded(tiny, tmp_path):
    single = save_bin_checkpoint(tiny, tmp_path / "bin1")
    assert os.listdir(single) == [WEIGHTS_NAME]
    sharded = save_bin_checkpoint(tiny, tmp_path / "bin2", max_shard_size="4KB")
    assert WEIGHTS_INDEX_NAME in os.listdir(sharded)
    for folder in (single, sharded):
        model = _empty()
        load_checkpoint_in_model(model, folder)
        _assert_same_weights(model, tiny)


def test_pickle_with_code_is_refused(tmp_path):
    path = tmp_path / WEIGHTS_NAME
    torch.save({"embed.weight": os.system}, str(path))
    with pytest.raises(ValueError, match="weights_only=True"):
        load_checkpoint_in_model(_empty(), str(path))


def test_dtype_casting_and_keep_in_fp32(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    model = _empty()
    load_checkpoint_in_model(model, folder, dtype="float16", keep_in_fp32_modules=["norm"])
    assert model.blocks[0].up.weight.dtype == torch.float16
    assert model.blocks[0].norm.weight.dtype == torch.float32
    torch.testing.assert_close(model.blocks[0].up.weight, tiny.blocks[0].up.weight.half())


def test_checkpoint_in_bf16_is_cast_to_the_model_dtype(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "bf16", dtype=torch.bfloat16)
    model = _empty()
    load_checkpoint_in_model(model, folder)
    assert model.blocks[0].up.weight.dtype == torch.float32
    torch.testing.assert_close(
        model.blocks[0].up.weight, tiny.blocks[0].up.weight.bfloat16().float()
    )


def test_device_map_with_disk_uses_safetensors_in_place(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    offload = tmp_path / "offload"
    model = _empty()
    device_map = {
        "embed": "cpu",
        "blocks.0": "cpu",
        "blocks.1": "cpu",
        "blocks.2": "disk",
        "blocks.3": "disk",
        "head": "cpu",
        "scale": "cpu",
    }
    load_checkpoint_in_model(model, folder, device_map=device_map, offload_folder=offload)
    assert model.blocks[2].up.weight.device.type == "meta"
    assert model.blocks[0].up.weight.device.type == "cpu"
    index = json.loads((offload / "index.json").read_text())
    assert set(index) == {n for n in tiny.state_dict() if n.startswith(("blocks.2", "blocks.3"))}
    entry = index["blocks.2.up.weight"]
    assert entry["safetensors_file"].startswith(str(tmp_path / "ckpt"))
    assert [f for f in os.listdir(offload) if f != "index.json"] == []  # nothing copied
    assert model._accel_load_report.disk_in_place == len(index)


def test_disk_weights_in_another_dtype_are_written_once(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    offload = tmp_path / "offload"
    model = _empty()
    device_map = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}
    load_checkpoint_in_model(
        model, folder, device_map=device_map, offload_folder=offload, dtype="float16"
    )
    index = json.loads((offload / "index.json").read_text())
    assert index["blocks.0.up.weight"]["dtype"] == "float16"
    written = [f for f in os.listdir(offload) if f.endswith(".safetensors")]
    assert written and model._accel_load_report.disk_written == len(index)


def test_bin_checkpoint_with_disk_writes_safetensors(tiny, tmp_path):
    folder = save_bin_checkpoint(tiny, tmp_path / "bin")
    offload = tmp_path / "offload"
    model = _empty()
    load_checkpoint_in_model(
        model, folder, device_map={"": "cpu", "blocks.1": "disk"}, offload_folder=offload
    )
    assert model.blocks[1].up.weight.device.type == "meta"
    assert any(f.endswith(".safetensors") for f in os.listdir(offload))


def test_disk_without_offload_folder_is_an_error(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with pytest.raises(ValueError, match="offload_folder"):
        load_checkpoint_in_model(_empty(), folder, device_map={"": "cpu", "blocks": "disk"})


def test_device_map_naming_a_missing_module_is_reported(tiny, tmp_path):
    # every tensor is still covered ("" -> cpu): warned, as the reference does
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with pytest.warns(UserWarning, match="'decoder'"):
        load_checkpoint_in_model(_empty(), folder, device_map={"": "cpu", "decoder": "cpu"})


def test_missing_shard_is_an_error(tiny, tmp_path):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt", max_shard_size="4KB")
    index = json.loads(open(os.path.join(folder, SAFE_WEIGHTS_INDEX_NAME)).read())
    victim = sorted(set(index["weight_map"].values()))[1]
    os.remove(os.path.join(folder, victim))
    with pytest.raises(FileNotFoundError, match=victim):
        load_checkpoint_in_model(_empty(), folder)


@pytest.mark.parametrize("damage", ["truncate", "garbage_header", "tiny"])
def test_corrupted_safetensors_is_an_error(tiny, tmp_path, damage):
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), checkpoint_state(tiny))
    data = path.read_bytes()
    if damage == "truncate":
        path.write_bytes(data[: len(data) // 2])
    elif damage == "garbage_header":
        path.write_bytes(data[:8] + b"{not json" + data[17:])
    else:
        path.write_bytes(b"abc")
    with pytest.raises(CorruptSafetensorsError, match="corrupted"):
        load_checkpoint_in_model(_empty(), str(path))


def test_missing_path_and_empty_folder_are_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_checkpoint_in_model(_empty(), str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="model.safetensors"):
        load_checkpoint_in_model(_empty(), str(tmp_path / "empty"))


def test_bad_index_is_an_error(tmp_path):
    (tmp_path / "model.safetensors.index.json").write_text('{"metadata": {}}')
    with pytest.raises(ValueError, match="weight_map"):
        load_checkpoint_in_model(_empty(), str(tmp_path))


def test_missing_and_unexpected_keys(tiny, tmp_path, caplog):
    state = checkpoint_state(tiny)
    del state["blocks.0.up.bias"]
    state["extra.weight"] = torch.zeros(2)
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), state)
    with pytest.raises(
        ValueError, match=r"missing \[blocks.0.up.bias\].*unexpected \[extra.weight\]"
    ):
        load_checkpoint_in_model(_empty(), str(path), strict=True)
    model = TinyLM()  # real weights: the missing tensor keeps its value
    kept = model.blocks[0].up.bias.detach().clone()
    with caplog.at_level("WARNING", logger="accel_bigmodel"):
        load_checkpoint_in_model(model, str(path))
    assert "blocks.0.up.bias" in caplog.text and "extra.weight" in caplog.text
    assert torch.equal(model.blocks[0].up.bias, kept)
    assert model._accel_load_report.missing_keys == ["blocks.0.up.bias"]


def test_unexpected_tensors_are_reported_in_the_reference_words(tmp_path, caplog):
    # Code written for the reference (and transformers users) look for this phrase.
    state = checkpoint_state(TinyLM())
    state["extra.weight"] = torch.zeros(2)
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), state)
    with caplog.at_level("WARNING", logger="accel_bigmodel"):
        load_checkpoint_in_model(TinyLM(), str(path))
    (record,) = [r for r in caplog.records if "extra.weight" in r.getMessage()]
    assert record.getMessage().startswith(
        f"Some weights of the model checkpoint at {path} were not used when initializing TinyLM:"
    )


def test_shape_mismatch_is_an_error(tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), checkpoint_state(TinyLM(width=8)))
    with pytest.raises(ValueError, match="shape"):
        load_checkpoint_in_model(_empty(), str(path))


def test_summary_is_logged(tiny, tmp_path, caplog):
    folder = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with caplog.at_level("INFO", logger="accel_bigmodel"):
        load_checkpoint_in_model(_empty(), folder, show_progress=False)
    assert any(r.message.startswith("Loaded ") and "cpu" in r.message for r in caplog.records)


def test_load_state_dict(tiny, tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), checkpoint_state(tiny))
    state = load_state_dict(str(path))
    torch.testing.assert_close(state["embed.weight"], tiny.embed.weight)
    state = load_state_dict(str(path), device_map={"": "cpu", "blocks": "disk"})
    assert state["blocks.0.up.weight"].device.type == "cpu"
    torch.save(checkpoint_state(tiny), str(tmp_path / "w.bin"))
    state = load_state_dict(str(tmp_path / "w.bin"))
    torch.testing.assert_close(state["blocks.1.down.weight"], tiny.blocks[1].down.weight)


def test_cpu_weights_are_memory_mapped_copy_on_write(tiny, tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), checkpoint_state(tiny))
    before = path.read_bytes()
    model = _empty()
    load_checkpoint_in_model(model, str(path))
    storage = model.blocks[0].up.weight.untyped_storage()
    assert storage.nbytes() == len(before)  # a view of the whole mapped file
    with torch.no_grad():
        model.blocks[0].up.weight.add_(1.0)
    assert path.read_bytes() == before  # the file is never written
    torch.testing.assert_close(model.blocks[0].up.weight, tiny.blocks[0].up.weight + 1)


def test_mmap_false_reads_into_private_memory(tiny, tmp_path):
    path = tmp_path / "model.safetensors"
    write_safetensors(str(path), checkpoint_state(tiny))
    model = _empty()
    load_checkpoint_in_model(model, str(path), mmap=False, num_threads=2)
    weight = model.blocks[0].up.weight
    assert weight.untyped_storage().nbytes() == weight.numel() * 4
    _assert_same_weights(model, tiny)

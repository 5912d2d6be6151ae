"""An offload file that changes under a running model, or differs from what accel wrote, is a
clear error naming the file on the next forward: never a dead process, never silent garbage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zlib

import pytest
import torch
from bigmodel_helpers import TinyLM, save_safetensors_checkpoint

from accel_bigmodel import (
    OffloadedFileChangedError,
    OffloadedWeightsLoader,
    SafetensorsFile,
    attach_prefetcher,
    disk_offload,
    dispatch_model,
    init_empty_weights,
    load_checkpoint_and_dispatch,
    offload_state_dict,
    offload_weight,
)

CHILD = os.path.join(os.path.dirname(__file__), "offload_tamper.py")
DISK_MAP = {"embed": "cpu", "blocks": "disk", "head": "cpu", "scale": "cpu"}
PREFETCH = ["off", "new-memory", "pool-buffers", "leased-map"]


@pytest.mark.parametrize("kind", ["accel-written", "checkpoint", "dat"])
def test_a_file_truncated_or_overwritten_under_a_running_model_is_an_error_naming_it(kind):
    # A child process: before the check, a truncated mapped file killed its process (SIGBUS).
    done = subprocess.run(
        [sys.executable, CHILD, kind], capture_output=True, text=True, timeout=300, check=False
    )
    cases = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert done.returncode == 0, (
        f"the process died (exit code {done.returncode}) after {len(cases)} of 8 cases: "
        f"{done.stderr[-2000:]}"
    )
    assert len(cases) == 8
    for case in cases:
        assert case["first_ok"], case
        assert case["error"] == "OffloadedFileChangedError", case
        assert case["path"] in case["message"], case
        if case["damage"] == "truncate":
            assert "was truncated or extended" in case["message"], case
        else:
            assert "was modified" in case["message"], case
        assert "(fetching weight '" in case["message"], case


def _set_prefetch(model: torch.nn.Module, prefetch: str) -> None:
    if prefetch == "off":
        attach_prefetcher(model, layers_ahead=0)
    elif prefetch == "new-memory":
        model._accel_prefetcher.map_files = False
        model._accel_prefetcher.read_into_buffers = False  # each module read into new memory
    elif prefetch == "pool-buffers":
        model._accel_prefetcher.map_files = False  # every file read into the pool's buffers


def _flip_byte(path, at: int) -> None:
    with open(path, "r+b") as handle:
        handle.seek(at)
        value = handle.read(1)[0]
        handle.seek(at)
        handle.write(bytes([value ^ 0xFF]))


@pytest.mark.parametrize("prefetch", PREFETCH)
@torch.no_grad()
def test_a_byte_changed_before_the_model_opened_a_file_accel_wrote_fails_its_crc(
    tiny, ids, tmp_path, prefetch
):
    folder = tmp_path / "offload"
    first = TinyLM().eval()
    first.load_state_dict(tiny.state_dict())
    disk_offload(first, folder, execution_device="cpu")
    torch.testing.assert_close(first(ids), tiny(ids))
    first._accel_prefetcher.close()
    path = folder / "model-offload.safetensors"
    index = json.loads((folder / "index.json").read_text())
    start, end = SafetensorsFile(path).span("blocks.1.up.weight")
    with open(path, "rb") as handle:
        handle.seek(start)
        assert index["blocks.1.up.weight"]["crc32"] == zlib.crc32(handle.read(end - start))
    _flip_byte(path, start + 5)

    # A later process offloads to the same folder: the index is reused, the file is not rewritten.
    again = TinyLM().eval()
    disk_offload(again, folder, execution_device="cpu")
    _set_prefetch(again, prefetch)
    with pytest.raises(OffloadedFileChangedError, match="CRC-32") as raised:
        again(ids)
    assert str(path) in str(raised.value) and "'blocks.1.up.weight'" in str(raised.value)
    assert raised.value.path == str(path)
    with pytest.raises(OffloadedFileChangedError, match="CRC-32"):
        again(ids)  # not a one-off: the damaged weight is refused at every fetch


@pytest.mark.parametrize("prefetch", PREFETCH)
@torch.no_grad()
def test_a_byte_changed_in_a_dat_file_fails_its_crc(tiny, ids, tmp_path, prefetch):
    folder = tmp_path / "dat"
    state = {k: v for k, v in tiny.state_dict().items() if k.startswith("blocks.")}
    offload_state_dict(folder, state)
    path = folder / "blocks.2.down.weight.dat"
    _flip_byte(path, 7)
    with init_empty_weights():
        model = TinyLM()
    model.embed.weight = torch.nn.Parameter(tiny.embed.weight.detach().clone())
    model.head.weight = model.embed.weight
    model = dispatch_model(model, DISK_MAP, offload_dir=folder)
    _set_prefetch(model, prefetch)
    with pytest.raises(OffloadedFileChangedError, match="CRC-32") as raised:
        model(ids)
    assert str(path) in str(raised.value) and "'blocks.2.down.weight'" in str(raised.value)


def test_offload_writers_record_the_crc_of_the_bytes_they_write(tmp_path):
    tensor = torch.randn(3, 4)
    index = offload_weight(tensor, "w", tmp_path)
    assert index["w"]["crc32"] == zlib.crc32((tmp_path / "w.dat").read_bytes())


def test_weights_cast_while_offloaded_record_the_crc_of_the_stored_bytes(tiny, tmp_path):
    checkpoint = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with init_empty_weights():
        model = TinyLM()
    model = load_checkpoint_and_dispatch(
        model,
        checkpoint,
        device_map=DISK_MAP,
        offload_folder=tmp_path / "offload",
        dtype=torch.float16,
    )
    index = json.loads((tmp_path / "offload" / "index.json").read_text())
    written = {k: v for k, v in index.items() if not os.path.isabs(v["safetensors_file"])}
    assert written  # converted weights are written to the offload folder
    for name, entry in written.items():
        handle = SafetensorsFile(tmp_path / "offload" / entry["safetensors_file"])
        start, end = handle.span(entry["weight_name"])
        with open(handle.path, "rb") as stream:
            stream.seek(start)
            assert entry["crc32"] == zlib.crc32(stream.read(end - start)), name
    in_place = [v for v in index.values() if os.path.isabs(v["safetensors_file"])]
    assert all("crc32" not in v for v in in_place)  # the checkpoint's own bytes are not read
    loader = model.blocks[0].up._hf_hook.weights_map.dataset
    for name in written:  # read back through the loader, which checks each CRC on first use
        assert loader[name].dtype == torch.float16


@pytest.mark.parametrize("prefetch", PREFETCH)
@torch.no_grad()
def test_a_file_replaced_by_a_rename_leaves_the_model_on_the_file_it_opened(
    tiny, ids, tmp_path, prefetch
):
    checkpoint = save_safetensors_checkpoint(tiny, tmp_path / "ckpt")
    with init_empty_weights():
        model = TinyLM()
    model = load_checkpoint_and_dispatch(
        model, checkpoint, device_map=DISK_MAP, offload_folder=tmp_path / "offload"
    )
    _set_prefetch(model, prefetch)
    expected = tiny(ids)
    torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    index = json.loads((tmp_path / "offload" / "index.json").read_text())
    path = index["blocks.1.up.weight"]["safetensors_file"]
    replacement = path + ".new"
    with open(replacement, "wb") as handle:
        handle.write(os.urandom(os.path.getsize(path)))
    os.replace(replacement, path)  # the old file lives on while the model holds it open
    torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)


def test_a_crc_that_is_not_an_int_is_an_error_naming_the_entry(tmp_path):
    offload_state_dict(tmp_path, {"w": torch.randn(4)})
    index = json.loads((tmp_path / "index.json").read_text())
    index["w"]["crc32"] = "abc"
    loader = OffloadedWeightsLoader(save_folder=tmp_path, index=index)
    with pytest.raises(ValueError, match=r"crc32 must be an int.*'w' has 'abc'"):
        loader["w"]


MIDWAY = os.path.join(os.path.dirname(__file__), "truncate_during_forward.py")


@pytest.mark.parametrize("kind", ["checkpoint", "dat"])
@pytest.mark.parametrize("block", [0, 1, 3, 5])
def test_a_file_truncated_by_another_process_during_a_forward_is_an_error_not_sigbus(kind, block):
    # Before the weights were read into process memory, computing on the mapped checkpoint
    # after another process truncated it killed the forward's process with SIGBUS.
    done = subprocess.run(
        [sys.executable, MIDWAY, kind, str(block)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, (
        f"the process died (exit code {done.returncode}): {done.stderr[-2000:]}"
    )
    (case,) = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert case["first_ok"], case
    if case["error"] is None:
        assert case["same"], case  # every weight left to read was already in memory
    else:
        assert case["error"] == "OffloadedFileChangedError", case
        assert "was truncated" in case["message"], case
        assert "(fetching weight '" in case["message"], case

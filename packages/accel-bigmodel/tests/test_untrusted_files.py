"""Pickled files never run code unless the caller opts in by name.

Each test writes a real malicious pickle whose ``__reduce__`` would create a marker file, has
the library read it, and checks that the marker never appears and that the refusal names the
file, the disallowed global and the opt-in.
"""

from __future__ import annotations

import datetime
import json
import os
import pickle
from pathlib import Path

import pytest
import torch
from bigmodel_helpers import TinyLM

from accel_bigmodel import (
    OffloadedWeightsLoader,
    UntrustedPickleError,
    load_checkpoint_in_model,
    read_dcp_metadata_safely,
    safe_dcp_load,
    safe_torch_load,
)


class Payload:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


def assert_refused(info: pytest.ExceptionInfo, path: object, opt_in: str) -> None:
    message = str(info.value)
    assert str(path) in message, message
    assert "posix.system" in message, message
    assert opt_in in message, message
    assert info.value.refused_global == "posix.system"


@pytest.mark.parametrize("zipped", [True, False], ids=["torch_save", "plain_pickle"])
def test_safe_torch_load_refuses_a_payload(tmp_path, zipped):
    marker, path = tmp_path / "marker", tmp_path / "evil.pt"
    if zipped:
        torch.save({"w": torch.ones(2), "x": Payload(marker)}, path)
    else:
        path.write_bytes(pickle.dumps({"x": Payload(marker)}))
    with pytest.raises(UntrustedPickleError) as info:
        safe_torch_load(path, opt_in="--trust_me")
    assert not marker.exists()
    assert_refused(info, path, "--trust_me")


def test_safe_torch_load_opt_in_and_allowed_globals_load_unusual_files(tmp_path):
    path = tmp_path / "dated.pt"
    torch.save({"w": torch.arange(3), "when": datetime.date(2024, 5, 1)}, path)
    with pytest.raises(UntrustedPickleError, match="datetime.date"):
        safe_torch_load(path)
    assert safe_torch_load(path, trust_pickles=True)["when"] == datetime.date(2024, 5, 1)
    loaded = safe_torch_load(path, allowed_globals=[datetime.date])
    assert loaded["when"] == datetime.date(2024, 5, 1)
    assert torch.equal(loaded["w"], torch.arange(3))


def test_load_checkpoint_in_model_refuses_a_payload_in_a_bin_file(tmp_path):
    model = TinyLM()
    marker = tmp_path / "marker"
    state = dict(model.state_dict())
    state["extra"] = Payload(marker)
    torch.save(state, tmp_path / "pytorch_model.bin")
    with pytest.raises(UntrustedPickleError) as info:
        load_checkpoint_in_model(model, str(tmp_path))
    assert not marker.exists()
    assert_refused(info, tmp_path / "pytorch_model.bin", "safetensors.torch.save_file")


def test_a_malformed_offload_index_names_the_file(tmp_path):
    (tmp_path / "index.json").write_text("{not json")
    with pytest.raises(ValueError, match="index.json is not valid JSON"):
        OffloadedWeightsLoader(save_folder=str(tmp_path))
    (tmp_path / "index.json").write_text(json.dumps(["a", "list"]))
    with pytest.raises(ValueError, match="holds a list"):
        OffloadedWeightsLoader(save_folder=str(tmp_path))


def test_a_malformed_weights_index_names_the_file(tmp_path):
    index = tmp_path / "model.safetensors.index.json"
    index.write_text("{broken")
    with pytest.raises(ValueError, match="model.safetensors.index.json is not valid JSON"):
        load_checkpoint_in_model(TinyLM(), str(index))


# --------------------------------------------------------------------------- DCP
def _save_dcp(folder: Path, extra: object = 3) -> None:
    import inspect

    import torch.distributed.checkpoint as dcp

    if "no_dist" not in inspect.signature(dcp.save).parameters:
        pytest.skip(
            f"these tests save and load DCP folders without a process group, through "
            f"torch.distributed.checkpoint's no_dist argument, which torch {torch.__version__} "
            "lacks (torch >= 2.6 has it)"
        )
    state = {"model.w": torch.arange(6.0).reshape(2, 3), "step": extra}
    dcp.save(state, checkpoint_id=str(folder), no_dist=True)


def test_real_dcp_metadata_reads_safely_and_loads(tmp_path):
    _save_dcp(tmp_path)
    metadata = read_dcp_metadata_safely(tmp_path)
    assert set(metadata.state_dict_metadata) == {"model.w", "step"}
    target = {"model.w": torch.zeros(2, 3), "step": 0}
    safe_dcp_load(target, tmp_path, no_dist=True)
    assert torch.equal(target["model.w"], torch.arange(6.0).reshape(2, 3))
    assert target["step"] == 3


def test_a_payload_in_dcp_metadata_is_refused_before_dcp_reads_it(tmp_path):
    _save_dcp(tmp_path)
    marker = tmp_path / "marker"
    (tmp_path / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(UntrustedPickleError) as info:
        read_dcp_metadata_safely(tmp_path, opt_in="--trust_pickles")
    assert not marker.exists()
    assert_refused(info, tmp_path / ".metadata", "--trust_pickles")
    with pytest.raises(UntrustedPickleError):
        safe_dcp_load({"model.w": torch.zeros(2, 3), "step": 0}, tmp_path, no_dist=True)
    assert not marker.exists()


def test_a_payload_in_a_dcp_entry_is_refused(tmp_path):
    marker = tmp_path / "marker"
    _save_dcp(tmp_path, extra=Payload(marker))
    assert not marker.exists()
    with pytest.raises(UntrustedPickleError) as info:
        safe_dcp_load({"model.w": torch.zeros(2, 3), "step": 0}, tmp_path, no_dist=True)
    assert not marker.exists()
    assert "entry 'step'" in str(info.value)
    assert_refused(info, tmp_path, "trust_pickles=True")


def test_trusted_dcp_metadata_with_other_objects_loads_when_opted_in(tmp_path):
    _save_dcp(tmp_path)
    metadata = read_dcp_metadata_safely(tmp_path)
    metadata.planner_data = {"saved_on": datetime.date(2024, 5, 1)}
    (tmp_path / ".metadata").write_bytes(pickle.dumps(metadata))
    with pytest.raises(UntrustedPickleError, match="datetime.date"):
        read_dcp_metadata_safely(tmp_path)
    trusted = read_dcp_metadata_safely(tmp_path, trust_pickles=True)
    assert trusted.planner_data == {"saved_on": datetime.date(2024, 5, 1)}
    target = {"model.w": torch.zeros(2, 3), "step": 0}
    safe_dcp_load(target, tmp_path, trust_pickles=True, no_dist=True)
    assert target["step"] == 3


def test_estimating_a_model_folder_never_imports_its_code(tmp_path):
    pytest.importorskip("transformers", reason="needs transformers: pip install transformers")
    from accel_bigmodel import estimate_memory

    marker = tmp_path / "marker"
    auto_map = {name: "evil.Model" for name in ("AutoModel", "AutoModelForCausalLM")}
    config = {"model_type": "gpt2", "n_layer": 1, "n_embd": 8, "n_head": 2, "vocab_size": 10}
    (tmp_path / "config.json").write_text(json.dumps({**config, "auto_map": auto_map}))
    (tmp_path / "evil.py").write_text(f"open({str(marker)!r}, 'w').write('ran')\n")
    rows = estimate_memory(str(tmp_path))
    assert not marker.exists()
    assert rows[0].total_size > 0


def test_the_refusal_survives_being_sent_between_processes():
    error = UntrustedPickleError("refused", "/x/.metadata", "posix.system")
    copy = pickle.loads(pickle.dumps(error))
    assert (str(copy), copy.path, copy.refused_global) == (
        "refused",
        "/x/.metadata",
        "posix.system",
    )


def test_a_legacy_pickle_stating_a_huge_string_length_is_a_named_error(tmp_path):
    """torch's restricted unpickler reads a string by the length the file states; read from a
    file object that length is allocated first (4 GiB here), read from memory it is not."""
    import pickle
    import resource
    import struct

    from accel_bigmodel import safe_torch_load

    path = tmp_path / "scheduler.bin"
    # protocol 2, BINUNICODE of 2**32 - 1 bytes, with 3 bytes there
    path.write_bytes(b"\x80\x02X" + struct.pack("<I", 2**32 - 1) + b"abc")
    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30 + _mapped_bytes(), hard))
    try:
        with pytest.raises(RuntimeError, match="damaged or truncated"):
            safe_torch_load(path)
    finally:
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
    path.write_bytes(pickle.dumps({"a": 1}, protocol=2)[:-4])  # cut short inside a number
    with pytest.raises(RuntimeError, match="damaged or truncated"):
        safe_torch_load(path)


def _mapped_bytes() -> int:
    import os

    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def test_a_dcp_metadata_memo_index_of_billions_allocates_nothing(tmp_path):
    """A pickle's memo index is a number the file states; the C unpickler grows an array to it
    (2**31 entries: 16 GiB), the metadata reader's memo is a dict."""
    import struct
    import tracemalloc

    from accel_bigmodel import read_dcp_metadata_safely

    # protocol 4: an empty list, memoized at index 2**31 - 1, then STOP
    (tmp_path / ".metadata").write_bytes(b"\x80\x04]r" + struct.pack("<I", 2**31 - 1) + b".")
    tracemalloc.start()
    try:
        with pytest.raises(ValueError, match="holds a list"):
            read_dcp_metadata_safely(tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 50 * 2**20, peak

import pytest
import torch

from accel_bigmodel import CorruptSafetensorsError, write_safetensors
from accel_bigmodel.files._safetensors_io import SafetensorsFile

TENSORS = {
    "f32": torch.randn(3, 4),
    "bf16": torch.randn(5, dtype=torch.bfloat16),
    "f16": torch.randn(2, 2, dtype=torch.float16),
    "i64": torch.arange(7),
    "bool": torch.tensor([True, False, True]),
    "empty": torch.zeros(0, 3),
}


def test_our_files_read_back_and_with_the_safetensors_library(tmp_path):
    from safetensors import safe_open

    path = tmp_path / "x.safetensors"
    write_safetensors(path, TENSORS, metadata={"format": "pt"})
    ours = SafetensorsFile(path)
    assert ours.metadata == {"format": "pt"}
    with safe_open(str(path), framework="pt") as handle:
        for name, tensor in TENSORS.items():
            assert torch.equal(handle.get_tensor(name), tensor)
            assert torch.equal(ours.view(name), tensor)
            assert torch.equal(ours.load(name), tensor)


def test_files_of_the_safetensors_library_read_with_ours(tmp_path):
    pytest.importorskip("numpy", reason="safetensors.torch.save_file needs numpy")
    from safetensors.torch import save_file

    path = tmp_path / "y.safetensors"
    save_file(TENSORS, str(path))
    ours = SafetensorsFile(path)
    for name, tensor in TENSORS.items():
        assert torch.equal(ours.view(name), tensor)


def test_casting_while_writing(tmp_path):
    path = tmp_path / "z.safetensors"
    write_safetensors(path, {"w": torch.randn(4)}, dtypes={"w": torch.float16})
    assert SafetensorsFile(path).dtype("w") == torch.float16


def test_offsets_pointing_outside_the_file_are_rejected(tmp_path):
    path = tmp_path / "bad.safetensors"
    write_safetensors(path, {"w": torch.randn(4)})
    data = bytearray(path.read_bytes())
    header = data[8 : 8 + int.from_bytes(data[:8], "little")].decode()
    bad = header.replace("[0,16]", "[0,64]").encode()
    path.write_bytes(bytes(data[:8]) + bad + bytes(data[8 + len(bad) :]))
    with pytest.raises(CorruptSafetensorsError, match="claims bytes"):
        SafetensorsFile(path)


def _file(path, header: dict, data: bytes) -> None:
    import json
    import struct

    encoded = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + data)


_F32 = {"dtype": "F32", "shape": [2]}


@pytest.mark.parametrize(
    ("header", "size"),
    [
        ({"a": {**_F32, "data_offsets": [0, 8]}, "b": {**_F32, "data_offsets": [4, 12]}}, 12),
        ({"a": {**_F32, "data_offsets": [0, 8]}, "b": {**_F32, "data_offsets": [12, 20]}}, 20),
        ({"a": {**_F32, "data_offsets": [4, 12]}}, 12),
        ({"a": {**_F32, "data_offsets": [0, 8]}}, 16),
        ({"a": {"dtype": "F32", "shape": [-1, -2], "data_offsets": [0, 8]}}, 8),
    ],
    ids=["overlap", "gap", "leading-gap", "trailing-bytes", "negative-dims"],
)
def test_offsets_the_safetensors_library_refuses_are_refused(tmp_path, header, size):
    from safetensors import SafetensorError, safe_open

    path = tmp_path / "bad.safetensors"
    _file(path, header, b"\0" * size)
    with pytest.raises(SafetensorError), safe_open(str(path), framework="pt") as handle:
        handle.get_tensor("a")
    with pytest.raises(CorruptSafetensorsError, match="bad.safetensors"):
        SafetensorsFile(path)


def test_tensors_in_any_header_order_that_tile_the_data_still_read(tmp_path):
    path = tmp_path / "ok.safetensors"
    data = torch.arange(4.0).numpy().tobytes()
    _file(
        path, {"b": {**_F32, "data_offsets": [8, 16]}, "a": {**_F32, "data_offsets": [0, 8]}}, data
    )
    assert torch.equal(SafetensorsFile(path).load("b"), torch.tensor([2.0, 3.0]))


@pytest.mark.parametrize("metadata", [5, "text", ["a"], {"format": 1}], ids=str)
def test_metadata_that_is_not_a_map_of_strings_is_refused(tmp_path, metadata):
    """The format's ``__metadata__`` maps strings to strings (the safetensors library refuses
    anything else); a reader of it must not meet an int or a list."""
    path = tmp_path / "bad.safetensors"
    _file(path, {"__metadata__": metadata, "a": {**_F32, "data_offsets": [0, 8]}}, bytes(8))
    with pytest.raises(CorruptSafetensorsError, match="map of strings to strings"):
        SafetensorsFile(path)

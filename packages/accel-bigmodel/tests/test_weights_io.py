"""The public weights I/O: tied-storage detection, the writer that stores ties once and the
threaded in-place reader."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import accel_bigmodel
from accel_bigmodel import (
    TIED_ALIASES_KEY,
    CheckpointKeysError,
    SafetensorsFile,
    find_tied_storages,
    load_safetensors_into,
    read_tied_aliases,
    save_safetensors_file,
    supports_in_place_load,
)


class Tied(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(40, 24)
        self.body = nn.Linear(24, 24)
        self.head = nn.Linear(24, 40, bias=False)
        self.head.weight = self.embed.weight
        self.register_buffer("steps", torch.zeros((), dtype=torch.int64))


def _seeded(seed: int) -> Tied:
    torch.manual_seed(seed)
    return Tied()


def test_tied_storages_by_view_or_by_storage() -> None:
    base = torch.zeros(4, 4)
    state = {"a": base, "b": base, "row": base[1], "other": torch.zeros(2), "x": "not a tensor"}
    assert find_tied_storages(state) == {"b": "a"}
    assert find_tied_storages(state, same_view=False) == {"b": "a", "row": "a"}
    assert find_tied_storages({"m": torch.empty(3, device="meta")}) == {}


def test_round_trip_in_place_in_chunks_keeps_ties(tmp_path, monkeypatch) -> None:
    source = _seeded(0)
    source.steps.fill_(7)
    path = tmp_path / "model.safetensors"
    assert save_safetensors_file(path, source.state_dict()) == {"head.weight": "embed.weight"}
    stored = SafetensorsFile(path)
    assert "head.weight" not in stored and read_tied_aliases(stored) == {
        "head.weight": "embed.weight"
    }
    assert TIED_ALIASES_KEY in stored.metadata and stored.metadata["format"] == "pt"

    # Tiny chunks: every tensor is split across several threads' reads.
    monkeypatch.setattr(accel_bigmodel.loading._weights_io, "CHUNK_BYTES", 100)
    target = _seeded(1)
    addresses = {k: v.data_ptr() for k, v in target.state_dict().items()}
    assert supports_in_place_load(target)
    assert load_safetensors_into(target, path, threads=3) == ([], [])
    for name, value in source.state_dict().items():
        assert torch.equal(target.state_dict()[name], value), name
    assert {k: v.data_ptr() for k, v in target.state_dict().items()} == addresses
    assert target.head.weight is target.embed.weight

    # Another dtype goes through a cast copy; a dict target is filled the same way.
    wide = {k: torch.zeros(v.shape, dtype=torch.float64) for k, v in stored_items(stored)}
    assert load_safetensors_into(wide, [path], threads=2, strict=False) == (
        [],
        ["head.weight", "steps"],
    )
    assert torch.equal(wide["body.weight"], source.body.weight.double())


def stored_items(file: SafetensorsFile) -> list[tuple[str, torch.Tensor]]:
    return [(name, file.view(name)) for name in file.keys() if file.dtype(name).is_floating_point]


def test_refused_loads_change_nothing(tmp_path) -> None:
    path = tmp_path / "model.safetensors"
    save_safetensors_file(path, _seeded(0).state_dict(), durable=False)

    smaller = nn.Module()
    smaller.embed = nn.Embedding(40, 24)
    before = smaller.embed.weight.clone()
    with pytest.raises(CheckpointKeysError, match="strict=True") as refused:
        load_safetensors_into(smaller, path)
    assert "body.weight" in refused.value.unexpected_keys
    assert torch.equal(smaller.embed.weight, before)
    missing, unexpected = load_safetensors_into(smaller, path, strict=False)
    assert missing == [] and "steps" in unexpected
    assert not torch.equal(smaller.embed.weight, before)

    # A shape mismatch anywhere is found before the first tensor is written.
    wrong = {"embed.weight": torch.zeros(40, 24), "body.weight": torch.zeros(3, 3)}
    with pytest.raises(ValueError, match=r"'body.weight'.*\[24, 24\].*\[3, 3\]"):
        load_safetensors_into(wrong, path, strict=False)
    assert not wrong["embed.weight"].any()


def test_custom_loading_code_and_non_tensors_are_refused(tmp_path) -> None:
    class Custom(nn.Linear):
        def _load_from_state_dict(self, *args, **kwargs):  # type: ignore[no-untyped-def]
            super()._load_from_state_dict(*args, **kwargs)

    path = tmp_path / "w.safetensors"
    save_safetensors_file(path, {"weight": torch.ones(2, 2), "bias": torch.ones(2)})
    custom = Custom(2, 2)
    assert not supports_in_place_load(custom)
    with pytest.raises(TypeError, match="load_state_dict"):
        load_safetensors_into(custom, path)
    with pytest.raises(TypeError, match=r"non-tensor entries \['note'\]"):
        save_safetensors_file(tmp_path / "x.safetensors", {"w": torch.ones(1), "note": "int8"})
    assert not (tmp_path / "x.safetensors").exists()


def test_shards_fill_one_target(tmp_path) -> None:
    source = _seeded(0).state_dict()
    names = list(source)
    first, second = tmp_path / "a.safetensors", tmp_path / "b.safetensors"
    save_safetensors_file(first, {k: source[k] for k in names[:2]})
    save_safetensors_file(second, {k: source[k] for k in names[2:]})
    target = _seeded(1)
    missing, unexpected = load_safetensors_into(target, [first, second], threads=2)
    assert (missing, unexpected) == ([], [])
    for name in names:
        assert torch.equal(target.state_dict()[name], source[name])

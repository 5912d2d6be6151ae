"""Offload storages: a kind registered from outside the package carries a disk-offloaded model
through the loader and the prefetcher, like the two built-in file layouts."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import torch
from bigmodel_helpers import TinyLM

from accel_bigmodel import (
    OffloadedFileChangedError,
    OffloadedWeightsLoader,
    OffloadStorage,
    StoredWeight,
    dispatch_model,
    init_empty_weights,
    register_offload_storage,
)


class MemoryStorage:
    """Weights kept as bytes in this process, one shelf per offload folder."""

    shelves: dict[str, dict[str, bytes]] = {}

    def __init__(self, folder: str | None) -> None:
        self.shelf = self.shelves.setdefault(str(folder), {})
        self.reads = 0

    def locate(self, key: str, entry: Mapping[str, Any]) -> StoredWeight:
        dtype = getattr(torch, entry["dtype"])
        return StoredWeight(
            f"memory:{key}", 0, len(self.shelf[key]), dtype, tuple(entry["shape"]), key
        )

    def check(self, source: str, key: str | None = None) -> None:
        if source.removeprefix("memory:") not in self.shelf:
            raise OffloadedFileChangedError(f"{source} was dropped", source, key)

    def read_into(self, stored: StoredWeight, offset: int, buffer: memoryview) -> None:
        self.reads += 1
        buffer[:] = self.shelf[stored.key][offset : offset + len(buffer)]

    def advise(self, stored: StoredWeight) -> None:
        pass

    def write(
        self,
        group: str,
        tensors: Sequence[tuple[str, torch.Tensor]],
        dtypes: Mapping[str, torch.dtype] | None = None,
    ) -> dict[str, dict[str, Any]]:
        entries = {}
        for name, tensor in tensors:
            data = tensor.detach().cpu().contiguous()
            self.shelf[name] = data.reshape(-1).view(torch.uint8).numpy().tobytes()
            dtype = str(data.dtype).removeprefix("torch.")
            entries[name] = {"storage": "memory", "dtype": dtype, "shape": list(data.shape)}
        return entries

    def close(self) -> None:
        pass


@pytest.fixture(scope="module", autouse=True)
def memory_storage():
    register_offload_storage("memory", MemoryStorage)


def test_a_storage_registered_from_outside_runs_a_disk_offloaded_model(tiny, ids, tmp_path):
    folder = str(tmp_path)
    storage = MemoryStorage(folder)
    assert isinstance(storage, OffloadStorage)
    index = storage.write("", list(tiny.state_dict().items()))
    with open(os.path.join(folder, "index.json"), "w", encoding="utf-8") as handle:
        json.dump(index, handle)
    with init_empty_weights():
        model = TinyLM()
    model = dispatch_model(model, {"": "disk"}, offload_dir=folder)
    prefetcher = model._accel_prefetcher
    assert all(plan for plan in prefetcher.plans.values())  # read into the pool's buffers
    with torch.no_grad():
        expected = tiny(ids)
        for _ in range(3):
            torch.testing.assert_close(model(ids), expected, rtol=0, atol=0)
    assert prefetcher.misses == 0 and prefetcher.hits > 0
    del MemoryStorage.shelves[folder]["blocks.2.up.weight"]
    with torch.no_grad(), pytest.raises(OffloadedFileChangedError, match="memory:blocks.2.up"):
        model(ids)
    prefetcher.close()


def test_an_entry_naming_an_unknown_storage_is_an_error_naming_the_registered_ones(tmp_path):
    loader = OffloadedWeightsLoader(
        save_folder=tmp_path, index={"w": {"storage": "tape", "dtype": "float32", "shape": [1]}}
    )
    with pytest.raises(ValueError, match=r"'w' names 'tape'.*register_offload_storage") as info:
        loader["w"]
    assert "'dat'" in str(info.value) and "'memory'" in str(info.value)


def test_a_storage_name_must_be_a_string_and_its_factory_callable():
    with pytest.raises(ValueError, match="name must be a non-empty string; got ''"):
        register_offload_storage("", MemoryStorage)
    with pytest.raises(ValueError, match="factory must be callable"):
        register_offload_storage("x", 3)  # type: ignore[arg-type]

"""Property-based checks: whatever a user puts in a ``device_map`` or ``max_memory``, the call
either works or raises the documented error (``DeviceMapError``), never a raw internal one."""

from __future__ import annotations

import tempfile

import pytest
import torch
from torch import nn

from accel_bigmodel import (
    DeviceMapError,
    check_device_map,
    get_max_memory,
    infer_auto_device_map,
    init_empty_weights,
    load_checkpoint_in_model,
    write_safetensors,
)

pytest.importorskip("hypothesis", reason="property-based tests need hypothesis (dev group)")
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

SETTINGS = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8))
        self.head = nn.Linear(8, 2)


def _empty() -> Net:
    with init_empty_weights():
        return Net()


NAMES = ["", "body", "body.0", "body.2", "body.0.weight", "head", "head.bias", "heads", "body.1"]
DEVICE_WORDS = [
    "cpu", "disk", "meta", "mps", "cuda", "cuda:0", "cuda:9", "xpu:1", "cpuu", "", "npu:0",
    "cpu:0", "hpu", "0", "auto", "cuda:-1", "CPU",
]  # fmt: skip
devices = st.one_of(
    st.integers(-3, 12),
    st.sampled_from(DEVICE_WORDS),
    st.sampled_from(["cpu", "meta", "cuda:3"]).map(torch.device),
    st.text(max_size=8),
    st.floats(allow_nan=True),
    st.none(),
    st.booleans(),
)
device_maps = st.dictionaries(
    st.one_of(st.sampled_from(NAMES), st.text(max_size=6)), devices, max_size=6
)

SIZE_WORDS = ["1GB", "10XB", "-1GB", "5MiB", "0", "100", "1e3KB", "infGB", "nanGB", "8Mb", " 2KB"]
memory_keys = st.one_of(
    st.integers(-2, 10),
    st.sampled_from(["cpu", "disk", "mps", "0", "1", "cuda:0", "tpu", "", "meta"]),
    st.sampled_from(["cpu", "cuda:1"]).map(torch.device),
    st.text(max_size=5),
)
sizes = st.one_of(
    st.integers(-10, 10**7),
    st.sampled_from(SIZE_WORDS),
    st.text(max_size=6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.none(),
)
budgets = st.dictionaries(memory_keys, sizes, max_size=5)


@pytest.fixture(scope="module")
def checkpoint() -> str:
    folder = tempfile.mkdtemp(prefix="accel-bigmodel-props-")
    path = f"{folder}/model.safetensors"
    write_safetensors(path, {k: v.clone() for k, v in Net().state_dict().items()})
    return path


@SETTINGS
@given(device_map=device_maps, check_devices=st.booleans())
def test_check_device_map_raises_only_device_map_error(device_map, check_devices):
    try:
        check_device_map(Net(), device_map, check_devices=check_devices)
    except DeviceMapError as error:
        assert "device_map" in str(error)


@SETTINGS
@given(device_map=device_maps)
def test_loading_with_any_device_map_works_or_names_the_entry(checkpoint, tmp_path, device_map):
    model = _empty()
    try:
        load_checkpoint_in_model(model, checkpoint, device_map=device_map, offload_folder=tmp_path)
    except DeviceMapError:
        assert all(p.device.type == "meta" for p in model.parameters())  # nothing was placed
        return
    assert all(p.device.type in ("cpu", "meta") for p in model.parameters())


@SETTINGS
@given(max_memory=budgets, check_devices=st.booleans())
def test_any_max_memory_works_or_names_the_entry(max_memory, check_devices):
    try:
        budget = get_max_memory(max_memory, check_devices=check_devices)
    except DeviceMapError as error:
        assert "max_memory" in str(error)
        return
    assert all(v is None or type(v) in (int, float) for v in budget.values())
    try:
        device_map = infer_auto_device_map(_empty(), max_memory, check_devices=check_devices)
    except DeviceMapError as error:  # only the empty budget is refused on top
        assert not budget and "at least one device" in str(error)
        return
    except ValueError as error:  # a valid budget that is too small says so
        assert "max_memory" in str(error)
        return
    check_device_map(_empty(), device_map, check_devices=check_devices)

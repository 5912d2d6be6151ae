"""infer_auto_device_map(fallback_allocation=True): a device that would stay empty receives the
first later module that fits; a device too small to run the offloaded layers is left out
instead of failing. offload_buffers=False warns when offloaded layers' buffers fit no GPU."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

from accel_bigmodel import infer_auto_device_map


class Net(nn.Module):
    """big (16640 bytes) first, then small (160 bytes), then a 2048-byte buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.big = nn.Linear(64, 64)
        self.small = nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 4))
        self.register_buffer("buf", torch.zeros(512))


def _plan(memory: dict, **kwargs) -> tuple[dict, list[str]]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = infer_auto_device_map(Net(), max_memory=memory, check_devices=False, **kwargs)
    return dict(plan), [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


def test_fallback_fills_a_device_that_would_stay_empty():
    memory = {0: 17000, "cpu": 10**6}
    # Keeping room for the offloaded layers only, big leaves GPU 0 empty (its 16,640 bytes
    # plus the room for the 2,048-byte buffer run there do not fit) ...
    assert _plan(memory, reserve="offloaded_layers")[0] == {"": "cpu"}
    plan, _ = _plan(memory, fallback_allocation=True, reserve="offloaded_layers")
    assert plan == {"small": 0, "big": "cpu", "buf": "cpu"}
    # ... while the default keeps room for the largest layer not placed yet: once big is
    # taken that is small (80 bytes), so big and small fit on GPU 0.
    expected = {"big": 0, "small": 0, "buf": "cpu"}
    assert _plan(memory)[0] == _plan(memory, fallback_allocation=True)[0] == expected


def test_fallback_is_not_used_when_the_regular_plan_succeeds():
    memory = {0: 20000, "cpu": 10**6}
    assert _plan(memory, fallback_allocation=True)[0] == _plan(memory)[0] == {"": 0}


def test_fallback_leaves_out_a_device_too_small_to_run_offloaded_layers():
    memory = {"cpu": 1000, "disk": 10**6}
    with pytest.raises(ValueError, match="largest offloaded layer"):
        _plan(memory, offload_to_disk=False)
    assert _plan(memory, fallback_allocation=True)[0] == {"": "disk"}
    assert _plan(memory)[0] == {"": "disk"}  # the default leaves it out too, as the reference


class Buffered(nn.Module):
    """A small first layer, then two blocks of 4224 bytes of weights and 8192 of buffers."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(4, 4)
        self.blocks = nn.ModuleList(Block() for _ in range(2))


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(32, 32)
        self.register_buffer("table", torch.zeros(2048))


@pytest.mark.parametrize("offload_buffers", [False, True])
def test_buffers_of_offloaded_layers_that_fit_no_gpu_warn_unless_offloaded(offload_buffers):
    memory = {0: 12600, "cpu": 10**6}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        plan = infer_auto_device_map(
            Buffered(),
            max_memory=memory,
            no_split_module_classes=["Block"],
            offload_buffers=offload_buffers,
            check_devices=False,
        )
    assert plan == {"first": 0, "blocks": "cpu"}
    warned = [w for w in caught if "offload_buffers=True" in str(w.message)]
    assert len(warned) == (0 if offload_buffers else 1)
    assert all("16384 bytes" in str(w.message) for w in warned)


def test_no_buffer_warning_when_the_buffers_fit():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        infer_auto_device_map(Buffered(), max_memory={0: 30000, "cpu": 10**6}, check_devices=False)
    assert not [w for w in caught if "offload_buffers" in str(w.message)]

import time

import pytest
import torch
from torch import nn

from accel_bigmodel import init_empty_weights, init_on_device


class WithBuffer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)
        self.register_buffer("running", torch.arange(4.0))


def test_parameters_go_to_meta_and_buffers_stay():
    with init_empty_weights():
        model = WithBuffer()
    assert model.linear.weight.device.type == "meta"
    assert isinstance(model.linear.weight, nn.Parameter)
    assert model.linear.weight.requires_grad
    assert model.running.device.type == "cpu"
    assert torch.equal(model.running, torch.arange(4.0))


def test_include_buffers_moves_buffers_too():
    with init_empty_weights(include_buffers=True):
        model = WithBuffer()
    assert model.running.device.type == "meta"
    assert model.linear.weight.device.type == "meta"


def test_environment_variable_sets_the_default(monkeypatch):
    monkeypatch.setenv("ACCELERATE_INIT_INCLUDE_BUFFERS", "1")
    with init_empty_weights():
        model = WithBuffer()
    assert model.running.device.type == "meta"


def test_the_accel_name_wins_over_the_reference_name(monkeypatch):
    monkeypatch.setenv("ACCEL_INIT_INCLUDE_BUFFERS", "off")
    monkeypatch.setenv("ACCELERATE_INIT_INCLUDE_BUFFERS", "1")
    with init_empty_weights():
        model = WithBuffer()
    assert model.running.device.type == "cpu"
    assert model.linear.weight.device.type == "meta"


@pytest.mark.parametrize("name", ["ACCEL_INIT_INCLUDE_BUFFERS", "ACCELERATE_INIT_INCLUDE_BUFFERS"])
def test_a_value_outside_the_vocabulary_is_refused_with_the_name(monkeypatch, name):
    monkeypatch.setenv(name, "maybe")
    with pytest.raises(ValueError, match=f"{name} must be one of 1/0, true/false.*'maybe'"):
        with init_empty_weights():
            pass


def test_progress_bars_refuse_a_bad_quiet_value(monkeypatch):
    from accel_bigmodel.files._progress import progress_enabled

    monkeypatch.setenv("ACCEL_BIGMODEL_QUIET", "yes")
    assert progress_enabled(None) is False
    monkeypatch.setenv("ACCEL_BIGMODEL_QUIET", "loud")
    with pytest.raises(ValueError, match="ACCEL_BIGMODEL_QUIET must be one of"):
        progress_enabled(None)


def test_patch_is_removed_after_the_context_even_on_error():
    original = nn.Module.register_parameter
    try:
        with init_empty_weights():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    assert nn.Module.register_parameter is original
    assert nn.Linear(2, 2).weight.device.type == "cpu"


def test_init_on_device_cpu_keeps_values():
    with init_on_device("cpu"):
        layer = nn.Linear(3, 3)
    assert layer.weight.device.type == "cpu"


def test_requires_grad_false_survives():
    class Frozen(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = nn.Parameter(torch.zeros(2), requires_grad=False)

    with init_empty_weights():
        model = Frozen()
    assert model.w.device.type == "meta" and not model.w.requires_grad


def test_seventy_billion_parameter_skeleton_builds_fast_without_memory():
    class Layer(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.q = nn.Linear(8192, 8192, bias=False)
            self.kv = nn.Linear(8192, 2048, bias=False)
            self.o = nn.Linear(8192, 8192, bias=False)
            self.gate_up = nn.Linear(8192, 2 * 28672, bias=False)
            self.down = nn.Linear(28672, 8192, bias=False)

    start = time.perf_counter()
    with init_empty_weights():
        model = nn.Sequential(nn.Embedding(128256, 8192), *[Layer() for _ in range(80)])
    elapsed = time.perf_counter() - start
    count = sum(p.numel() for p in model.parameters())
    assert count > 60e9
    assert all(p.device.type == "meta" for p in model.parameters())
    assert elapsed < 10  # generous: the machine is shared; typically well under a second

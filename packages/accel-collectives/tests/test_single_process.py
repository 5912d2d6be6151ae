"""The collectives on a single process: local semantics, no process group."""

from __future__ import annotations

import types
from collections.abc import Iterator

import pytest
import torch
from accel_state import PartialState

import accel_collectives as ac
from accel_collectives import _ops


@pytest.fixture(autouse=True)
def single_process(monkeypatch: pytest.MonkeyPatch) -> Iterator[PartialState]:
    for key in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "ACCEL_DEBUG_MODE", "ACCELERATE_DEBUG_MODE"):
        monkeypatch.delenv(key, raising=False)
    PartialState._reset_state()
    state = PartialState(cpu=True)
    assert state.num_processes == 1
    yield state
    PartialState._reset_state()


def test_gather_returns_its_input() -> None:
    t = torch.arange(3)
    assert ac.gather(t) is t
    nested = {"a": [t]}
    assert ac.gather(nested) is nested


def test_gather_object_returns_a_list() -> None:
    items = ["a", 1]
    out = ac.gather_object(items)
    assert out == ["a", 1] and out is not items
    assert ac.gather_object({"k": 1}) == [{"k": 1}]
    assert ac.gather_object((1, 2)) == [(1, 2)]


def test_broadcast_is_identity_and_checks_source() -> None:
    t = torch.ones(2)
    assert ac.broadcast(t) is t
    objs = [1, 2]
    assert ac.broadcast_object_list(objs) is objs
    with pytest.raises(ValueError, match=r"in \[0, 0\]; got 1"):
        ac.broadcast(t, from_process=1)
    with pytest.raises(ValueError, match="got 3"):
        ac.broadcast_object_list(objs, from_process=3)


def test_reduce_on_one_process() -> None:
    t = torch.tensor([1.0, 2.0])
    for reduction in ("mean", "sum", "max", "min", "none"):
        out = ac.reduce(t, reduction=reduction)
        assert torch.equal(out, t) and out.data_ptr() != t.data_ptr()
    assert torch.equal(ac.reduce(t, scale=2.0), torch.tensor([2.0, 4.0]))
    assert torch.equal(t, torch.tensor([1.0, 2.0]))
    as_int = ac.reduce(torch.tensor([3]))
    assert as_int.is_floating_point() and as_int.item() == 3.0
    assert ac.reduce(torch.tensor([3]), reduction="sum").dtype == torch.int64
    out = ac.reduce({"a": [torch.ones(1)]}, "sum")
    assert type(out["a"]) is list and out["a"][0].item() == 1
    with pytest.raises(
        ValueError, match=r"one of \['sum', 'mean', 'max', 'min', 'none'\]; got 'avg'"
    ):
        ac.reduce(t, reduction="avg")
    with pytest.raises(TypeError):
        ac.reduce({"a": "text"})


def test_pad_input_tensors_pads_to_a_multiple_of_the_processes() -> None:
    batch = torch.arange(6).reshape(3, 2)
    out = ac.pad_input_tensors(batch, batch_size=3, num_processes=4)
    assert torch.equal(out, torch.cat([batch, torch.zeros(1, 2, dtype=torch.int64)]))
    assert ac.pad_input_tensors(batch, 3, 3) is batch
    nested = ac.pad_input_tensors({"x": batch, "y": [torch.ones(3)]}, 3, 2)
    assert nested["x"].shape == (4, 2) and torch.equal(
        nested["y"][0], torch.tensor([1.0] * 3 + [0])
    )
    assert ac.pad_input_tensors(torch.ones(2, 7), 7, 3, dim=1).shape == (2, 9)
    with pytest.raises(ValueError, match="num_processes must be at least 1; got 0"):
        ac.pad_input_tensors(batch, 3, 0)
    with pytest.raises(TypeError):
        ac.pad_input_tensors({"x": "text"}, 3, 2)
    assert issubclass(ac.CannotPadNestedTensorWarning, UserWarning)


def test_pad_and_copy_on_one_process() -> None:
    t = torch.arange(3)
    assert ac.pad_across_processes(t) is t
    assert ac.copy_tensor_to_devices(t) is t
    with pytest.raises(ValueError, match="got None"):
        ac.copy_tensor_to_devices(None)


def test_device_backends_move_tensors_to_the_process_device() -> None:
    # nccl-like backends only send device memory: CPU tensors are moved first.
    fake = types.SimpleNamespace(backend="nccl", device=torch.device("meta"))
    moved = _ops._comm_tensor(torch.ones(2, 3).t(), fake)  # type: ignore[arg-type]
    assert moved.device.type == "meta" and moved.is_contiguous()
    gloo = types.SimpleNamespace(backend="gloo", device=torch.device("meta"))
    kept = torch.ones(2)
    same = _ops._comm_tensor(kept, gloo)  # type: ignore[arg-type]
    assert same.data_ptr() == kept.data_ptr()  # no copy: a detached alias of the same memory
    strided = torch.ones(2, 3).t()
    fixed = _ops._comm_tensor(strided, gloo)  # type: ignore[arg-type]
    assert fixed.device.type == "cpu" and fixed.is_contiguous() and torch.equal(fixed, strided)


def test_cached_state_follows_a_reset() -> None:
    assert _ops._get_state().initialized
    PartialState._reset_state()
    state = _ops._get_state()  # a reset state is created again, not reused empty
    assert state.initialized and state.num_processes == 1
    assert ac.gather_object("x") == ["x"]


def test_average_parameters_refuses_integer_tensors_and_keeps_one_process_values() -> None:
    weights = [torch.tensor([1.0, 2.0]), torch.tensor([[3.0]], dtype=torch.float64)]
    ac.average_parameters(weights)
    assert weights[0].tolist() == [1.0, 2.0] and weights[1].tolist() == [[3.0]]
    with pytest.raises(TypeError, match=r"dtype torch.int64 and shape \(2,\)"):
        ac.average_parameters([torch.tensor([1, 2])])

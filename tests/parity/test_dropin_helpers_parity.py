"""Differential tests: small helpers of the reference's module paths (``get_sampler``,
``move_to_device``, ``patch_optimizer_step``, ``ThreadLocalSharedDict``) give the same results
in accel and in the reference library for the same inputs."""

from __future__ import annotations

import threading
from collections import OrderedDict, namedtuple

import pytest
import torch
from torch.utils.data import BatchSampler, DataLoader, RandomSampler, SequentialSampler

pytest.importorskip(
    "accelerate", reason="the reference library is not installed (uv sync --group bench)"
)

import accel.data_loader as our_data
import accel.optimizer as our_optim
import accel.state as our_state
import accelerate.data_loader as ref_data
import accelerate.optimizer as ref_optim
import accelerate.state as ref_state


class _Stream(torch.utils.data.IterableDataset):
    def __iter__(self):
        return iter(range(4))


def test_get_sampler_finds_the_same_sampler():
    data = list(range(10))
    random = RandomSampler(data)
    loaders = [
        DataLoader(data, batch_size=2),
        DataLoader(data, batch_size=3, sampler=random),
        DataLoader(data, batch_sampler=BatchSampler(SequentialSampler(data), 4, False)),
        DataLoader(data, sampler=BatchSampler(random, 2, True), batch_size=None),
        DataLoader(_Stream(), batch_size=2),
    ]
    for loader in loaders:
        assert our_data.get_sampler(loader) is ref_data.get_sampler(loader)
    assert our_data.get_sampler(loaders[1]) is random
    assert our_data.get_sampler(loaders[3]) is random


def test_move_to_device_keeps_containers_and_moves_tensors():
    Pair = namedtuple("Pair", "a b")
    state = {
        "state": OrderedDict({0: {"step": torch.tensor(3.0), "exp_avg": torch.ones(2)}}),
        "groups": [Pair(torch.zeros(1), 0.5), (torch.ones(1, dtype=torch.int64), "x")],
        "none": None,
    }
    ours = our_optim.move_to_device(state, "meta")
    theirs = ref_optim.move_to_device(state, "meta")

    def shape(value):
        if isinstance(value, torch.Tensor):
            return ("tensor", value.device.type, value.dtype, tuple(value.shape))
        if isinstance(value, dict):
            return (type(value), {k: shape(v) for k, v in value.items()})
        if isinstance(value, (list, tuple)):
            return (type(value), [shape(v) for v in value])
        return value

    assert shape(ours) == shape(theirs)
    assert type(ours["groups"][0]) is Pair and type(ours["state"]) is OrderedDict
    assert state["state"][0]["exp_avg"].device.type == "cpu"  # the input is left alone


def test_patch_optimizer_step_records_the_call_and_returns_the_result():
    results = []
    for module in (our_optim, ref_optim):
        model = torch.nn.Linear(2, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        holder = type("Holder", (), {})()
        holder._accelerate_step_called = False
        patched = module.patch_optimizer_step(holder, optimizer.step)
        before = holder._accelerate_step_called
        model(torch.ones(1, 2)).sum().backward()
        out = patched(closure=lambda: torch.tensor(2.0))
        results.append((before, holder._accelerate_step_called, float(out)))
    assert results[0] == results[1] == (False, True, 2.0)


def test_thread_local_shared_dict_is_shared_within_a_thread_only():
    def behaviour(cls):
        class Owner:
            shared = cls()

        a, b = Owner(), Owner()
        a.shared["x"] = 1
        seen = [b.shared.get("x"), Owner.shared.get("x")]
        other = []
        thread = threading.Thread(target=lambda: other.append(dict(Owner().shared)))
        thread.start()
        thread.join(timeout=30)
        b.shared = {"y": 2}
        return seen, other, dict(a.shared), isinstance(Owner.__dict__["shared"], threading.local)

    assert behaviour(our_state.ThreadLocalSharedDict) == behaviour(ref_state.ThreadLocalSharedDict)
    assert behaviour(our_state.ThreadLocalSharedDict) == ([1, 1], [{}], {"y": 2}, True)

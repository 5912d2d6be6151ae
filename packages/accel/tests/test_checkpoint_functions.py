"""accel.checkpointing's functional API: save_accelerator_state / load_accelerator_state and
save_custom_state / load_custom_state write and read the files of save_state / load_state."""

from __future__ import annotations

import os
import random

import pytest
import torch

from accel import Accelerator
from accel.checkpointing import (
    SAFE_MODEL_NAME,
    load_accelerator_state,
    load_custom_state,
    save_accelerator_state,
    save_custom_state,
)
from accel.utils import UnsafeCheckpointError


class Counter:
    def __init__(self, value: object = 0) -> None:
        self.value = value

    def state_dict(self) -> dict:
        return {"value": self.value}

    def load_state_dict(self, state: dict) -> None:
        self.value = state["value"]


def build(seed: int) -> tuple[torch.nn.Module, torch.optim.Optimizer, object]:
    torch.manual_seed(seed)
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model(torch.ones(4, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    return model, optimizer, scheduler


def same_state(a: torch.nn.Module, b: torch.nn.Module) -> bool:
    return all(torch.equal(a.state_dict()[k], b.state_dict()[k]) for k in a.state_dict())


def test_round_trip(tmp_path) -> None:
    model, optimizer, scheduler = build(0)
    random.seed(7)
    out = save_accelerator_state(
        str(tmp_path / "ckpt"), [model.state_dict()], [optimizer], [scheduler], [], 0, step=5
    )
    assert out == tmp_path / "ckpt"
    assert (out / f"{SAFE_MODEL_NAME}.safetensors").is_file()
    expected_random = random.random()

    other, other_opt, other_sched = build(1)
    assert not same_state(model, other)
    attributes = load_accelerator_state(str(out), [other], [other_opt], [other_sched], [], 0)
    assert attributes == {"step": 5}
    assert same_state(model, other)
    assert other_opt.state_dict()["state"].keys() == optimizer.state_dict()["state"].keys()
    assert other_sched.state_dict() == scheduler.state_dict()
    assert random.random() == expected_random  # the random states came back


def test_accelerator_reads_what_the_function_writes(tmp_path) -> None:
    model, optimizer, scheduler = build(0)
    save_accelerator_state(
        str(tmp_path / "ckpt"),
        [model],
        [optimizer],
        [scheduler],
        [],
        0,
        step=3,
        safe_serialization=False,
    )
    assert (tmp_path / "ckpt" / "pytorch_model.bin").is_file()
    accelerator = Accelerator(cpu=True)
    other, other_opt, other_sched = accelerator.prepare(*build(1))
    accelerator.load_state(str(tmp_path / "ckpt"))
    assert same_state(model, accelerator.unwrap_model(other)) and accelerator.step == 3
    assert other_sched.scheduler.state_dict() == scheduler.state_dict()


def test_function_reads_what_save_state_writes(tmp_path) -> None:
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler = accelerator.prepare(*build(0))
    accelerator.step = 9
    accelerator.save_state(str(tmp_path / "ckpt"))
    other, other_opt, other_sched = build(1)
    attributes = load_accelerator_state(
        str(tmp_path / "ckpt"), [other], [other_opt], [other_sched], [], 0, map_location="cpu"
    )
    assert attributes == {"step": 9}
    assert same_state(accelerator.unwrap_model(model), other)


def test_load_refuses_a_mismatch_and_changes_nothing(tmp_path) -> None:
    model, optimizer, scheduler = build(0)
    save_accelerator_state(str(tmp_path / "ckpt"), [model], [optimizer], [scheduler], [], 0, 1)
    other, other_opt, _ = build(1)
    before = {k: v.clone() for k, v in other.state_dict().items()}
    with pytest.raises(ValueError, match="schedulers"):
        load_accelerator_state(str(tmp_path / "ckpt"), [other], [other_opt], [], [], 0)
    assert all(torch.equal(before[k], other.state_dict()[k]) for k in before)
    with pytest.raises(ValueError, match="process_index"):
        load_accelerator_state(str(tmp_path / "ckpt"), [other], [other_opt], [], [], 1)


def test_custom_state_round_trip_and_save_state_files(tmp_path) -> None:
    save_custom_state(Counter(41), str(tmp_path), index=2)
    assert (tmp_path / "custom_checkpoint_2.pkl").is_file()
    restored = Counter()
    load_custom_state(restored, str(tmp_path), index=2)
    assert restored.value == 41

    accelerator = Accelerator(cpu=True)
    accelerator.register_for_checkpointing(Counter(7))
    accelerator.save_state(str(tmp_path / "ckpt"))
    from_save_state = Counter()
    load_custom_state(from_save_state, str(tmp_path / "ckpt"), 0)
    assert from_save_state.value == 7


class Payload:
    def __reduce__(self):
        return (os.getcwd, ())


def test_custom_state_refuses_code(tmp_path) -> None:
    with pytest.raises(TypeError, match="posix.getcwd|weights_only"):
        save_custom_state(Counter(Payload()), str(tmp_path))
    assert not (tmp_path / "custom_checkpoint_0.pkl").exists()
    torch.save({"value": Payload()}, tmp_path / "custom_checkpoint_0.pkl")
    target = Counter()
    with pytest.raises(UnsafeCheckpointError):
        load_custom_state(target, str(tmp_path))
    assert target.value == 0
    load_custom_state(target, str(tmp_path), trust_pickles=True)
    assert target.value == os.getcwd()

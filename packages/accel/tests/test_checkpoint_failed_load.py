"""A load_state that refuses any file of a checkpoint leaves the run exactly as it was."""

import copy
import json
import os
import pathlib
import random
from pathlib import Path

import numpy as np
import pytest
import torch
from accel_state import AcceleratorState, GradientState
from safetensors.torch import save_file
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel._training_checkpoints.load._load import StateRefusedError
from accel.utils import CheckpointIntegrityError, ProjectConfiguration, UnsafeCheckpointError


class Counter:
    def __init__(self, value=0):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


class _WritesAFile:
    target = ""

    def __reduce__(self):
        return (pathlib.Path.write_text, (pathlib.Path(self.target), "pwned"))


def _run(tmp_path):
    """A prepared fp16 run (grad scaler) with every kind of checkpointed object."""
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    acc = Accelerator(
        mixed_precision="fp16", project_config=ProjectConfiguration(project_dir=str(tmp_path))
    )
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    data = TensorDataset(torch.randn(32, 4), torch.randn(32, 1))
    loader = DataLoader(data, batch_size=4, shuffle=True)
    model, optimizer, scheduler, loader = acc.prepare(model, optimizer, scheduler, loader)
    counter = Counter()
    acc.register_for_checkpointing(counter)
    return acc, model, optimizer, scheduler, loader, counter


def _steps(acc, model, optimizer, scheduler, loader, counter, count):
    batches = iter(loader)
    for _ in range(count):
        x, y = next(batches)
        acc.backward(torch.nn.functional.mse_loss(model(x), y))
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad()
        counter.value += 1
    return batches


def _snapshot(acc, model, optimizer, scheduler, loader, counter):
    return {
        "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "optimizer": copy.deepcopy(optimizer.state_dict()),
        "lr": [g["lr"] for g in optimizer.param_groups],
        "scheduler": copy.deepcopy(scheduler.state_dict()),
        "last_epoch": scheduler.scheduler.last_epoch,
        "loader": copy.deepcopy(loader.state_dict()),
        "counter": counter.value,
        "scaler": copy.deepcopy(acc.scaler.state_dict()),
        "torch_rng": torch.get_rng_state(),
        "python_rng": random.getstate(),
        "numpy_rng": np.random.get_state()[1].copy(),
        "step": acc.step,
    }


def _assert_same(before, after):
    assert before["weights"].keys() == after["weights"].keys()
    for key, value in before["weights"].items():
        assert torch.equal(value, after["weights"][key]), key
    assert before["lr"] == after["lr"]
    _assert_nested_equal(before["optimizer"], after["optimizer"])
    assert before["scheduler"] == after["scheduler"]
    assert before["last_epoch"] == after["last_epoch"]
    _assert_nested_equal(before["loader"], after["loader"])
    assert before["counter"] == after["counter"]
    assert before["scaler"] == after["scaler"]
    assert torch.equal(before["torch_rng"], after["torch_rng"])
    assert before["python_rng"] == after["python_rng"]
    assert np.array_equal(before["numpy_rng"], after["numpy_rng"])
    assert before["step"] == after["step"]


def _assert_nested_equal(a, b):
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and torch.equal(a, b)
    elif isinstance(a, dict):
        assert a.keys() == b.keys()
        for key in a:
            _assert_nested_equal(a[key], b[key])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_nested_equal(x, y)
    else:
        assert a == b


def _fix_manifest(out, name):
    """Record the tampered file's size and checksum, as an attacker who can write both would."""
    from accel._training_checkpoints.files._manifest import file_checksum

    path = out / "accel_checkpoint.json"
    manifest = json.loads(path.read_text())
    manifest["files"][name] = (out / name).stat().st_size
    manifest["checksums"][name] = file_checksum(str(out / name))
    path.write_text(json.dumps(manifest))


def _corrupt(out, name, at=None):
    """Flip 8 bytes (in the middle, or from ``at``): same size, other content."""
    path = out / name
    data = bytearray(path.read_bytes())
    middle = len(data) // 2 if at is None else at % len(data)
    for i in range(middle, min(middle + 8, len(data))):
        data[i] ^= 0xFF
    path.write_bytes(bytes(data))


def _unsafe_pickle(out, name, marker):
    _WritesAFile.target = str(marker)
    torch.save({"state": _WritesAFile()}, out / name)
    _fix_manifest(out, name)


def _wrong_content(out, name):
    """A well-formed file of the right kind whose content does not fit this run."""
    path = out / name
    if name == "model.safetensors":
        save_file({"0.weight": torch.zeros(3, 3)}, str(path), metadata={"format": "pt"})
    elif name == "optimizer.bin":
        torch.save({"state": {}, "param_groups": [{"params": [0], "lr": 1e-5}]}, path)
    elif name.startswith("random_states"):
        torch.save({"torch_manual_seed": torch.zeros(3, dtype=torch.uint8)}, path)
    elif name == "dataloader.bin":
        torch.save({"epoch": 0, "batches_yielded": 1, "total_batch_size": 999}, path)
    else:
        torch.save([1, 2, 3], path)
    _fix_manifest(out, name)


FILES = [
    "model.safetensors",
    "optimizer.bin",
    "scheduler.bin",
    "scaler.pt",
    "dataloader.bin",
    "custom_checkpoint_0.pkl",
    "random_states_0.pkl",
]
REFUSALS = {
    "corrupt": (CheckpointIntegrityError, "checksum recorded in its manifest"),
    "delete": (CheckpointIntegrityError, "is missing"),
    "unsafe": (UnsafeCheckpointError, "refused without running it"),
}
WRONG = {
    "model.safetensors": (KeyError, "lacks"),
    "optimizer.bin": (ValueError, "same parameter groups"),
    "scheduler.bin": (TypeError, "must be a dict"),
    "scaler.pt": (TypeError, "must be a dict"),
    "dataloader.bin": (ValueError, "same total batch size"),
    # refused by Counter itself, named with its file
    "custom_checkpoint_0.pkl": (
        StateRefusedError,
        r"registered object 0 \(Counter\) refused the state in custom_checkpoint_0.pkl",
    ),
    "random_states_0.pkl": (ValueError, "generators refuse"),
}


CASES = [
    (name, how)
    for name in FILES
    for how in [*sorted(REFUSALS), "wrong"]
    if not (how == "unsafe" and name.endswith(".safetensors"))  # safetensors holds no pickle
]


@pytest.mark.parametrize(("name", "how"), CASES)
def test_refused_file_changes_nothing(tmp_path, name, how):
    run = _run(tmp_path)
    acc = run[0]
    _steps(*run, count=3)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    assert name in json.loads((out / "accel_checkpoint.json").read_text())["files"]

    # The run moves on: other weights, lr 0.1 -> 1e-5, later schedule, loader mid-epoch.
    _steps(*run, count=2)
    for group in run[2].param_groups:
        group["lr"] = 1e-5
    acc.step = 17
    before = _snapshot(*run)

    marker = tmp_path / "pwned.txt"
    if how == "corrupt":
        _corrupt(out, name)
    elif how == "delete":
        (out / name).unlink()
    elif how == "unsafe":
        _unsafe_pickle(out, name, marker)
    else:
        _wrong_content(out, name)
    error, message = WRONG[name] if how == "wrong" else REFUSALS[how]
    with pytest.raises(error, match=message):
        acc.load_state(out)
    assert not marker.exists()
    _assert_same(before, _snapshot(*run))


def test_corrupt_weights_load_silently_only_when_checksums_are_off(tmp_path):
    run = _run(tmp_path)
    acc, model = run[0], run[1]
    out = Path(acc.save_state(tmp_path / "ckpt"))
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    _corrupt(out, "model.safetensors", at=-8)  # data section: the header stays intact
    with pytest.raises(CheckpointIntegrityError) as caught:
        acc.load_state(out)
    text = str(caught.value)
    assert "'model.safetensors'" in text and "crc32:" in text and "verify_checksums=False" in text
    acc.load_state(out, verify_checksums=False)
    changed = [k for k in saved if not torch.equal(saved[k], model.state_dict()[k])]
    assert changed  # the damage went through: this is what the checksum protects against


def test_a_load_refused_by_a_checksum_copies_no_weight_byte(tmp_path, monkeypatch):
    """The checksums of every file are verified before the weights are read into the model:
    a damaged data section (header intact) is refused before the first chunk is copied."""
    from accel_bigmodel.loading import _weights_io

    copies = []
    read_group = _weights_io._read_group

    def spy(group):
        copies.append(len(group))
        read_group(group)

    monkeypatch.setattr(_weights_io, "_read_group", spy)
    run = _run(tmp_path)
    acc, model = run[0], run[1]
    out = Path(acc.save_state(tmp_path / "ckpt"))
    saved = {k: v.detach().clone() for k, v in model.state_dict().items()}
    with torch.no_grad():
        for param in model.parameters():
            param.add_(1.0)
    acc.load_state(out)
    assert copies and all(torch.equal(v, saved[k]) for k, v in model.state_dict().items())

    with torch.no_grad():
        for param in model.parameters():
            param.add_(1.0)
    before = _snapshot(*run)
    _corrupt(out, "model.safetensors", at=-8)
    copies.clear()
    with pytest.raises(CheckpointIntegrityError, match="crc32:"):
        acc.load_state(out)
    assert copies == []
    _assert_same(before, _snapshot(*run))


def test_loaded_state_equals_saved_state(tmp_path):
    run = _run(tmp_path)
    acc = run[0]
    _steps(*run, count=3)
    out = acc.save_state(tmp_path / "ckpt")
    saved = _snapshot(*run)
    _steps(*run, count=2)
    for group in run[2].param_groups:
        group["lr"] = 1e-5
    acc.load_state(out)
    now = _snapshot(*run)
    # The loader reports the loaded position until it is iterated (a second save keeps it).
    assert now["loader"]["batches_yielded"] == saved["loader"]["batches_yielded"] == 3
    _assert_same(saved, now)


def test_failure_while_applying_puts_back_what_was_applied(tmp_path):
    run = _run(tmp_path)
    acc, counter = run[0], run[5]
    _steps(*run, count=3)
    out = acc.save_state(tmp_path / "ckpt")
    _steps(*run, count=2)
    before = _snapshot(*run)

    class Refuses(Counter):
        def load_state_dict(self, state):
            raise RuntimeError("refused by the object itself")

    acc._custom_objects[0] = Refuses(counter.value)
    with (
        pytest.raises(StateRefusedError, match="refused by the object itself") as caught,
        pytest.warns(UserWarning, match="which refused their own previous state"),
    ):
        acc.load_state(out)
    assert "custom_checkpoint_0.pkl" in str(caught.value) and "Refuses" in str(caught.value)
    acc._custom_objects[0] = counter
    # Everything, the model weights included, is as it was before the call.
    _assert_same(before, _snapshot(*run))
    assert os.path.isdir(out)


LOADER_CONTENT = {
    "epoch is a string": ({"epoch": "x"}, "'epoch' must be an int >= 0"),
    "epoch is a bool": ({"epoch": True}, "'epoch' must be an int >= 0"),
    "negative position": ({"batches_yielded": -5}, "'batches_yielded' must be an int >= 0"),
    "past the epoch": ({"batches_yielded": 10**6}, "at most the 8 batches"),
    "seed is a float": ({"sampler_seed": 1.5}, "'sampler_seed' must be an int or None"),
    "generator state garbage": (
        {"generator_state": torch.zeros(3, dtype=torch.uint8)},
        "'generator_state' must be a torch.uint8 tensor",
    ),
    "newer format": ({"version": 99}, "'version' must be an int from 1 to 1"),
}


@pytest.mark.parametrize("case", sorted(LOADER_CONTENT))
def test_wrong_loader_position_is_refused_in_phase_one(tmp_path, case):
    """A dataloader.bin whose size and checksum were recomputed but whose content is wrong is
    refused before any state changes, naming the file; the weights stay as they were."""
    run = _run(tmp_path)
    acc = run[0]
    _steps(*run, count=3)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    _steps(*run, count=2)
    before = _snapshot(*run)
    changes, message = LOADER_CONTENT[case]
    state = torch.load(out / "dataloader.bin", weights_only=True)
    state.update(changes)
    torch.save(state, out / "dataloader.bin")
    _fix_manifest(out, "dataloader.bin")
    with pytest.raises(ValueError, match=message) as caught:
        acc.load_state(out)
    assert "dataloader.bin" in str(caught.value)
    _assert_same(before, _snapshot(*run))


def test_loader_refuses_a_wrong_position_directly_and_keeps_its_own():
    run_loader = DataLoader(TensorDataset(torch.arange(10.0)), batch_size=2)
    AcceleratorState._reset_state(reset_partial_state=True)
    loader = Accelerator().prepare(run_loader)
    next(iter(loader))
    kept = loader.state_dict()
    with pytest.raises(ValueError, match="at most the 5 batches"):
        loader.load_state_dict({**kept, "batches_yielded": 6})
    loader.load_state_dict({**kept, "batches_yielded": 5})  # the end of the epoch is a position
    assert loader.state_dict()["batches_yielded"] == 5


@pytest.mark.parametrize("how", ["unsafe", "wrong"])
def test_refused_bin_weights_change_nothing(tmp_path, how):
    run = _run(tmp_path)
    acc = run[0]
    _steps(*run, count=3)
    out = Path(acc.save_state(tmp_path / "ckpt", safe_serialization=False))
    _steps(*run, count=2)
    before = _snapshot(*run)
    marker = tmp_path / "pwned.txt"
    if how == "unsafe":
        _unsafe_pickle(out, "pytorch_model.bin", marker)
        error, message = UnsafeCheckpointError, "refused without running it"
    else:
        torch.save({"0.weight": torch.zeros(8, 4)}, out / "pytorch_model.bin")
        _fix_manifest(out, "pytorch_model.bin")
        error, message = KeyError, r"lacks \['0.bias'"
    with pytest.raises(error, match=message):
        acc.load_state(out)
    assert not marker.exists()
    _assert_same(before, _snapshot(*run))
    if how == "wrong":
        acc.load_state(out, strict=False)  # the matching key loads, the others keep theirs
        assert torch.equal(run[1].state_dict()["0.weight"], torch.zeros(8, 4))


def _set_momentum(state, shape):
    state["state"][0]["momentum_buffer"] = torch.zeros(shape)


def _add_exp_avg(state, shape):
    state["state"][0]["exp_avg"] = torch.zeros(shape)


def _set_lr(state, _):
    state["param_groups"][0]["lr"] = "fast"


def _set_betas(state, _):
    state["param_groups"][0]["momentum"] = [0.9, "x"]


def _set_last_epoch(state, _):
    state["last_epoch"] = "x"


VALUES = {
    "momentum_buffer of another shape": ("optimizer.bin", _set_momentum, r"\['momentum_buffer'\]"),
    "exp_avg of another shape": (
        "optimizer.bin",
        _add_exp_avg,
        r"\['exp_avg'\] has shape \[4, 8\]",
    ),
    "lr a string": ("optimizer.bin", _set_lr, r"param_groups\[0\]\['lr'\] must be a number"),
    "momentum a list": ("optimizer.bin", _set_betas, r"\['momentum'\] must be a number"),
    "last_epoch a string": ("scheduler.bin", _set_last_epoch, r"'last_epoch' must be a number"),
}


@pytest.mark.parametrize("case", sorted(VALUES))
def test_a_value_torch_would_take_and_fail_on_later_is_refused_naming_it(tmp_path, case):
    name, tamper, message = VALUES[case]
    run = _run(tmp_path)
    acc = run[0]
    _steps(*run, count=3)
    out = Path(acc.save_state(tmp_path / "ckpt"))
    _steps(*run, count=2)
    before = _snapshot(*run)
    state = torch.load(out / name, weights_only=True)
    tamper(state, (4, 8))  # parameter 0 is the 8 x 4 weight
    torch.save(state, out / name)
    _fix_manifest(out, name)
    with pytest.raises(CheckpointIntegrityError, match=message) as refused:
        acc.load_state(out)
    assert name in str(refused.value) and "Nothing was restored" in str(refused.value)
    _assert_same(before, _snapshot(*run))

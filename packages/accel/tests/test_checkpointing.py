import importlib.util
import json
import os
import pathlib
import shutil
import sys
import warnings
from pathlib import Path

import pytest
import torch
from accel_state.testing import run_command

from accel import Accelerator
from accel._training_checkpoints.files._manifest import file_checksum
from accel.utils import ProjectConfiguration

SCRIPTS = Path(__file__).parent / "scripts"


def _common():
    spec = importlib.util.spec_from_file_location("ckpt_common", SCRIPTS / "ckpt_common.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)
        self.body = torch.nn.Linear(4, 4)
        self.head = torch.nn.Linear(4, 10, bias=False)
        self.head.weight = self.embed.weight


class Counter:
    def __init__(self, value=0):
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


def _accelerator(tmp_path, **config):
    return Accelerator(project_config=ProjectConfiguration(project_dir=str(tmp_path), **config))


def test_exact_resume_on_one_process(tmp_path):
    common = _common()
    acc = common.fresh_accelerator(str(tmp_path), seed=1)
    objs = common.build(acc)
    seen_full = common.train(acc, *objs, save_at=7)
    final = common.weights(acc, objs[0])

    acc = common.fresh_accelerator(str(tmp_path), seed=12345)
    objs = common.build(acc)
    acc.load_state()
    assert objs[4].step == 7 and acc.project_configuration.iteration == 1
    seen_resumed = common.train(acc, *objs)
    resumed = common.weights(acc, objs[0])
    assert seen_resumed == seen_full[7:]
    assert final.keys() == resumed.keys()
    assert all(torch.equal(final[k], resumed[k]) for k in final)


def test_tied_weights_saved_once_and_stay_tied(tmp_path):
    acc = _accelerator(tmp_path)
    model = acc.prepare(Tied())
    out = acc.save_state(tmp_path / "ckpt")
    from safetensors import safe_open

    with safe_open(os.path.join(out, "model.safetensors"), "pt") as f:
        keys = set(f.keys())
    assert keys == {"embed.weight", "body.weight", "body.bias"}

    fresh = Tied()
    acc2 = _accelerator(tmp_path)
    acc2.prepare(fresh)
    acc2.load_state(out)
    assert fresh.head.weight is fresh.embed.weight
    assert torch.equal(fresh.embed.weight, model.embed.weight)
    assert torch.equal(fresh.body.weight, model.body.weight)


@pytest.mark.parametrize("safe", [True, False])
def test_missing_keys_name_the_keys(tmp_path, safe):
    acc = _accelerator(tmp_path)
    acc.prepare(torch.nn.Sequential(torch.nn.Linear(2, 2)))
    out = acc.save_state(tmp_path / "ckpt", safe_serialization=safe)
    acc2 = _accelerator(tmp_path)
    other = acc2.prepare(torch.nn.Sequential(torch.nn.Linear(2, 2), torch.nn.Linear(2, 2)))
    with pytest.raises(KeyError, match=r"lacks \['1.weight', '1.bias'\].*strict=False"):
        acc2.load_state(out)
    acc2.load_state(out, strict=False)
    assert torch.equal(other[0].weight, acc._models[0][0].weight)


def test_registered_objects_scaler_step_and_rng(tmp_path):
    acc = _accelerator(tmp_path)
    counter = Counter(41)
    acc.register_for_checkpointing(counter)
    acc.step = 3
    out = acc.save_state(tmp_path / "ckpt")
    expected = torch.rand(3)
    counter.value = 0
    acc.step = 0
    torch.manual_seed(999)
    acc.load_state(out)
    assert counter.value == 41 and acc.step == 3
    assert torch.equal(torch.rand(3), expected)
    with pytest.raises(ValueError, match=r"Item at index 1: int"):
        acc.register_for_checkpointing(Counter(), 5)


class Opaque:
    pass


class Holder(Counter):
    def state_dict(self):
        return {"thing": Opaque()}


def test_registered_object_with_unsafe_type_is_refused_at_save(tmp_path):
    acc = _accelerator(tmp_path)
    acc.register_for_checkpointing(Holder())
    with pytest.raises(TypeError, match="registered object 0 \\(Holder\\).*add_safe_globals"):
        acc.save_state(tmp_path / "ckpt")
    assert not (tmp_path / "ckpt").exists()


def test_hooks_run_write_into_the_checkpoint_and_can_be_removed(tmp_path):
    acc = _accelerator(tmp_path)
    model = acc.prepare(torch.nn.Linear(2, 2))
    calls = []

    def save_hook(models, weights, output_dir):
        calls.append(("save", len(models), len(weights)))
        Path(output_dir, "config.json").write_text("{}")
        weights.pop()  # saved by the hook itself

    def load_hook(models, input_dir):
        calls.append(("load", len(models), Path(input_dir, "config.json").exists()))
        models.pop()

    save_handle = acc.register_save_state_pre_hook(save_hook)
    load_handle = acc.register_load_state_pre_hook(load_hook)
    out = acc.save_state(tmp_path / "ckpt")
    assert sorted(os.listdir(out)) == [
        "accel_checkpoint.json",
        "config.json",
        "random_states_0.pkl",
    ]
    before = model.weight.detach().clone()
    with torch.no_grad():
        model.weight.add_(1)
    acc.load_state(out)
    assert not torch.equal(model.weight, before)  # the hook took the model off the list
    assert calls == [("save", 1, 1), ("load", 1, True)]
    save_handle.remove()
    load_handle.remove()
    acc.save_state(tmp_path / "ckpt")
    acc.load_state(out)
    assert len(calls) == 2 and torch.equal(model.weight, before + 1)


def test_automatic_naming_rotation_and_latest(tmp_path):
    acc = _accelerator(tmp_path, automatic_checkpoint_naming=True, total_limit=2)
    counter = Counter()
    acc.register_for_checkpointing(counter)
    for value in range(4):
        counter.value = value
        acc.save_state()
    folder = tmp_path / "checkpoints"
    assert sorted(os.listdir(folder)) == ["checkpoint_2", "checkpoint_3"]
    counter.value = -1
    acc.load_state()
    assert counter.value == 3
    assert acc.project_configuration.iteration == 4
    with pytest.raises(FileExistsError, match="never reused"):
        acc.project_configuration.iteration = 3
        acc.save_state()


def test_partial_and_tampered_checkpoints_are_refused(tmp_path):
    acc = _accelerator(tmp_path)
    acc.register_for_checkpointing(Counter(1))
    out = Path(acc.save_state(tmp_path / "ckpt"))
    manifest = json.loads((out / "accel_checkpoint.json").read_text())
    assert manifest["format_version"] == 1 and manifest["world_size"] == 1
    assert set(manifest["files"]) == {"custom_checkpoint_0.pkl", "random_states_0.pkl"}

    with open(out / "custom_checkpoint_0.pkl", "ab") as handle:
        handle.write(b"x")
    with pytest.raises(ValueError, match="size recorded in its manifest"):
        acc.load_state(out)

    manifest["format_version"] = 99
    (out / "accel_checkpoint.json").write_text(json.dumps(manifest))
    with pytest.raises(ValueError, match="format 99. Upgrade accel"):
        acc.load_state(out)

    (out / "accel_checkpoint.json").unlink()
    with pytest.raises(FileNotFoundError, match="incomplete"):
        acc.load_state(out)

    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me")
    with pytest.raises(FileExistsError, match="holds other files"):
        acc.save_state(tmp_path / "mine")
    assert (tmp_path / "mine" / "notes.txt").read_text() == "keep me"


class _WritesAFile:
    target = ""

    def __reduce__(self):
        return (pathlib.Path.write_text, (pathlib.Path(self.target), "pwned"))


def test_malicious_pickle_is_refused_not_run(tmp_path):
    acc = _accelerator(tmp_path)
    acc.register_for_checkpointing(Counter(1))
    out = Path(acc.save_state(tmp_path / "ckpt"))
    target = tmp_path / "pwned.txt"
    _WritesAFile.target = str(target)
    payload = out / "custom_checkpoint_0.pkl"
    torch.save({"value": _WritesAFile()}, payload)
    # Whoever can write the file can fix the manifest too: only the loader stands in the way.
    manifest = json.loads((out / "accel_checkpoint.json").read_text())
    manifest["files"][payload.name] = payload.stat().st_size
    manifest["checksums"][payload.name] = file_checksum(str(payload))
    (out / "accel_checkpoint.json").write_text(json.dumps(manifest))
    with pytest.raises(Exception, match="weights_only=True.*refused without running it"):
        acc.load_state(out)
    assert not target.exists()


def test_replacing_an_existing_checkpoint_folder(tmp_path):
    acc = _accelerator(tmp_path)
    counter = Counter(1)
    acc.register_for_checkpointing(counter)
    out = acc.save_state(tmp_path / "latest")
    counter.value = 2
    assert acc.save_state(tmp_path / "latest") == out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["latest"]
    counter.value = 0
    acc.load_state(out)
    assert counter.value == 2


def test_other_world_size_warns_and_loads(tmp_path):
    acc = _accelerator(tmp_path)
    acc.prepare(torch.nn.Linear(2, 2))
    out = Path(acc.save_state(tmp_path / "ckpt"))
    manifest = json.loads((out / "accel_checkpoint.json").read_text())
    manifest["world_size"] = 4
    # As saved by 4 processes: each wrote its own random states (a manifest whose count no
    # such file backs is refused, see test_checkpoint_faults.py).
    for rank in (1, 2, 3):
        name = f"random_states_{rank}.pkl"
        shutil.copy(out / "random_states_0.pkl", out / name)
        manifest["files"][name] = manifest["files"]["random_states_0.pkl"]
        manifest["checksums"][name] = manifest["checksums"]["random_states_0.pkl"]
    (out / "accel_checkpoint.json").write_text(json.dumps(manifest))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        acc.load_state(out)
    assert any("saved by 4 processes and is loaded by 1" in str(w.message) for w in caught)


def test_killed_save_keeps_previous_checkpoint(tmp_path):
    result = run_command(
        [sys.executable, str(SCRIPTS / "ckpt_killed.py"), str(tmp_path)], timeout=120, check=False
    )
    assert result.returncode == -9, result.stdout + result.stderr
    folder = tmp_path / "checkpoints"
    # The killed writer's lock stays too; the next save finds its process gone and takes it.
    expected = [".checkpoint_1.lock", ".checkpoint_1.partial", "checkpoint_0"]
    assert sorted(os.listdir(folder)) == expected
    assert (folder / ".checkpoint_1.partial" / "model.safetensors").exists()

    acc = _accelerator(tmp_path, automatic_checkpoint_naming=True, total_limit=1)
    model = acc.prepare(torch.nn.Linear(8, 8))
    counter = Counter()
    acc.register_for_checkpointing(counter)
    acc.load_state()
    assert counter.value == 10 and acc.project_configuration.iteration == 1
    torch.manual_seed(0)
    assert torch.equal(model.weight, torch.nn.Linear(8, 8).weight)
    acc.save_state()  # the next save clears the interrupted one and rotates
    assert sorted(os.listdir(folder)) == ["checkpoint_1"]

"""``save_state(async_save=True)``: files equal to a synchronous save of the same moment,
failures surface on the next wait, a crash mid-write keeps the previous checkpoint, and the
multi-process engines (DDP, FSDP) resume exactly from an asynchronous save."""

import os
import sys
from pathlib import Path

import pytest
import torch
from accel_state import DeepSpeedPlugin
from accel_state.testing import run_command, run_distributed
from safetensors import safe_open
from safetensors.torch import load_file

from accel import Accelerator
from accel._training_checkpoints.save._async_save import AsyncCheckpoint, AsyncSaveError
from accel.utils import ProjectConfiguration

SCRIPTS = Path(__file__).parent / "scripts"


class Tied(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 8)
        self.body = torch.nn.Linear(8, 8)
        self.head = torch.nn.Linear(8, 10, bias=False)
        self.head.weight = self.embed.weight

    def forward(self, x):
        return self.head(torch.relu(self.body(self.embed(x))))


class Progress:
    def __init__(self):
        self.step = 0
        self.history = [0.5]

    def state_dict(self):
        return {"step": self.step, "history": self.history}

    def load_state_dict(self, state):
        self.step, self.history = state["step"], list(state["history"])


class Value:
    def __init__(self):
        self.value = None

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


class Opaque:
    """A value torch.load(weights_only=True) refuses: the write fails after the snapshot."""


class Refused:
    def state_dict(self):
        return {"value": Opaque()}

    def load_state_dict(self, state):
        pass


def _train_step(acc, model, optimizer, scheduler, progress):
    loss = model(torch.randint(0, 10, (4, 3))).pow(2).mean()
    acc.backward(loss)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    progress.step += 1
    progress.history.append(float(loss.detach()))  # mutated in place: the snapshot must not see it


def _files(folder):
    """Every file of a checkpoint but the manifest, read back: name -> tensors / values."""
    out = {}
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if name.endswith(".safetensors"):
            with safe_open(path, "pt") as handle:
                out[name] = (
                    {k: handle.get_tensor(k) for k in handle.keys()},
                    handle.metadata(),
                )
        elif name != "accel_checkpoint.json":
            out[name] = torch.load(path, weights_only=True)
    return out


def _same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and a.dtype == b.dtype and torch.equal(a, b)
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    return a == b


def test_async_save_writes_what_a_sync_save_of_that_moment_writes(tmp_path):
    acc = Accelerator(cpu=True, project_config=ProjectConfiguration(project_dir=str(tmp_path)))
    torch.manual_seed(0)
    model = Tied()
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model, optimizer, scheduler = acc.prepare(model, optimizer, scheduler)
    progress = Progress()
    acc.register_for_checkpointing(progress)
    objs = (model, optimizer, scheduler, progress)
    _train_step(acc, *objs)

    acc.save_state(tmp_path / "sync")
    at_save = {k: v.clone() for k, v in model.state_dict().items()}
    handle = acc.save_state(tmp_path / "async", async_save=True)
    assert isinstance(handle, AsyncCheckpoint) and handle.path == str(tmp_path / "async")
    for _ in range(3):  # training goes on while the files are written
        _train_step(acc, *objs)
    assert handle.wait() == str(tmp_path / "async") and handle.done()
    assert handle.exception() is None and "committed" in repr(handle)

    sync, asyn = _files(tmp_path / "sync"), _files(tmp_path / "async")
    assert sync.keys() == asyn.keys() and "model.safetensors" in sync
    for name in sync:
        assert _same(sync[name], asyn[name]), name
    weights, metadata = asyn["model.safetensors"]
    assert (
        "head.weight" not in weights
        and '"head.weight": "embed.weight"' in metadata["accel_tied_aliases"]
    )  # tied weights stay one tensor in the copy
    assert asyn["custom_checkpoint_0.pkl"]["step"] == 1

    # The next asynchronous save copies into the host memory of the previous one.
    held = acc._checkpointer.save_buffers.nbytes()
    assert held >= sum(t.numel() * 4 for t in model.state_dict().values())
    acc.save_state(tmp_path / "async_2", async_save=True)
    assert acc._checkpointer.save_buffers.nbytes() == held
    acc.end_training()  # waits, then frees that memory
    assert (
        acc._checkpointer.save_buffers is None
        and (tmp_path / "async_2" / "model.safetensors").is_file()
    )

    # The asynchronous checkpoint restores the state of the moment of the call.
    acc.load_state(tmp_path / "async")
    assert all(torch.equal(at_save[k], v) for k, v in model.state_dict().items())
    assert progress.step == 1 and scheduler.scheduler.last_epoch == 1


def test_failed_background_write_surfaces_on_next_save_and_keeps_the_previous(tmp_path):
    config = ProjectConfiguration(
        project_dir=str(tmp_path), automatic_checkpoint_naming=True, async_save=True
    )
    acc = Accelerator(cpu=True, project_config=config)
    model = acc.prepare(torch.nn.Linear(4, 4))
    first = acc.save_state()  # asynchronous through the project configuration
    assert isinstance(first, AsyncCheckpoint)
    refused = Refused()
    acc.register_for_checkpointing(refused)
    failing = acc.save_state()  # waits for the first, then fails in the background
    assert first.done() and first.exception() is None
    with pytest.raises(AsyncSaveError, match=r"checkpoint_1.*TypeError.*Opaque.*not committed"):
        acc.save_state()  # the next save raises the failure, naming the checkpoint
    assert isinstance(failing.exception(), TypeError)
    folder = tmp_path / "checkpoints"
    assert sorted(os.listdir(folder)) == ["checkpoint_0"]  # the failed save left nothing

    acc._custom_objects.remove(refused)
    with torch.no_grad():
        model.weight.zero_()
    acc.load_state("latest")  # loads checkpoint_0, the last one committed
    assert not torch.equal(model.weight, torch.zeros(4, 4))
    assert acc.project_configuration.iteration == 1  # past checkpoint_0
    assert acc.save_state(async_save=False) == str(folder / "checkpoint_1")
    assert sorted(os.listdir(folder)) == ["checkpoint_0", "checkpoint_1"]


def test_deepspeed_refuses_async_save_before_writing(tmp_path):
    acc = Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin(zero_stage=2))
    with pytest.raises(NotImplementedError, match=r"DEEPSPEED\. Call save_state\(async_save=Fal"):
        acc.save_state(tmp_path / "ckpt", async_save=True)
    assert os.listdir(tmp_path) == []


def test_crash_during_background_write_keeps_the_previous_checkpoint(tmp_path):
    result = run_command(
        [sys.executable, str(SCRIPTS / "ckpt_async_killed.py"), str(tmp_path)],
        timeout=120,
        check=False,
    )
    assert result.returncode == 3, result.stdout + result.stderr
    folder = tmp_path / "checkpoints"
    # The killed writer's lock stays too; the next save finds its process gone and takes it.
    expected = [".checkpoint_1.lock", ".checkpoint_1.partial", "checkpoint_0"]
    assert sorted(os.listdir(folder)) == expected
    assert (folder / ".checkpoint_1.partial" / "model.safetensors").exists()

    acc = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(
            project_dir=str(tmp_path), automatic_checkpoint_naming=True
        ),
    )
    model = acc.prepare(torch.nn.Linear(8, 8))
    value = Value()
    acc.register_for_checkpointing(value)
    acc.load_state("latest")
    assert value.value == 10
    torch.manual_seed(0)
    assert torch.equal(model.weight, torch.nn.Linear(8, 8).weight)  # not the +1 of the 2nd save
    assert acc.project_configuration.iteration == 1


@pytest.mark.multiprocess
def test_two_processes_ddp_and_fsdp_resume_exactly_from_async_saves(tmp_path):
    result = run_distributed(SCRIPTS / "ckpt_async.py", str(tmp_path), num_processes=2, timeout=300)
    for check in ("ddp_exact_resume", "fsdp_sharded_resume", "fsdp_full_resume"):
        for rank in (0, 1):
            assert f"PASSED check_{check} rank={rank}" in result.stdout, (
                result.stdout + result.stderr
            )
    assert (tmp_path / "at_exit" / "accel_checkpoint.json").is_file()  # committed before exit


def test_first_async_save_finds_its_host_memory_prepared_after_the_first_step(tmp_path):
    config = ProjectConfiguration(project_dir=str(tmp_path), async_save=True)
    acc = Accelerator(cpu=True, project_config=config)
    model = torch.nn.Sequential(torch.nn.Linear(64, 64), torch.nn.Linear(64, 8))
    optimizer = torch.optim.AdamW(model.parameters())
    model, optimizer = acc.prepare(model, optimizer)
    checkpointer = acc._checkpointer
    assert checkpointer.prewarm_thread is None  # nothing before the first step
    acc.backward(model(torch.randn(4, 64)).sum())
    optimizer.step()
    checkpointer.prewarm_thread.join(timeout=60)
    pool = checkpointer.save_buffers
    # weights (4 tensors) + Adam's exp_avg and exp_avg_sq of each, step counters: all free
    expected = sum(p.numel() * 4 for p in model.parameters()) * 3
    prepared = pool.nbytes()
    assert prepared >= expected and not pool._lent
    optimizer.zero_grad()
    acc.backward(model(torch.randn(4, 64)).sum())
    optimizer.step()  # a second step starts no second preparation
    handle = acc.save_state(tmp_path / "ckpt")
    handle.wait()
    assert pool.nbytes() == prepared  # the save copied into the prepared buffers only
    saved = load_file(str(tmp_path / "ckpt" / "model.safetensors"))
    for key, value in acc.unwrap_model(model).state_dict().items():
        assert torch.equal(saved[key], value)

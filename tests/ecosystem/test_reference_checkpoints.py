"""A run started on the reference library resumes on accel.

The reference (``ACCEL_AS_ACCELERATE=0``) trains a few steps and ``save_state``\\ s a checkpoint
(automatic naming); accel (``=1``) and the reference then each ``load_state`` it and train on.
Same checkpoint, same torch: the losses, the weights, the random draws, the step, the
scheduler and the registered object are equal (bit for bit on CPU). A tampered reference
checkpoint is refused by accel with a named error, and nothing of the run changes.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

SCRIPT = str(Path(__file__).parent / "scripts" / "reference_checkpoint_run.py")
_SAME = ("losses", "weights", "draws", "step", "seen", "lr", "num_processes")


def _save_and_resume(eco: SimpleNamespace, project: Path, *flags: str) -> tuple[dict, dict, dict]:
    saved = eco.run([sys.executable, SCRIPT, "save", str(project), *flags], as_accelerate=False)
    reference = eco.run(
        [sys.executable, SCRIPT, "resume", str(project), *flags], as_accelerate=False
    )
    ours = eco.run([sys.executable, SCRIPT, "resume", str(project), *flags], as_accelerate=True)
    assert "site-packages/accelerate/" in reference["accelerate_file"]
    assert "/accel/" in ours["accelerate_file"]
    return saved, reference, ours


@pytest.mark.slow
@pytest.mark.timeout(900)  # three interpreters, each training on CPU
@pytest.mark.parametrize("serialization", ["safetensors", "bin"])
def test_a_reference_checkpoint_resumes_on_accel_as_on_the_reference(
    tmp_path: Path, eco: SimpleNamespace, serialization: str
) -> None:
    eco.require("accelerate")
    flags = ["--bin"] if serialization == "bin" else []
    _, reference, ours = _save_and_resume(eco, tmp_path, *flags)
    folder = tmp_path / "checkpoints" / "checkpoint_0"
    weights = "pytorch_model_1.bin" if flags else "model_1.safetensors"
    assert weights in os.listdir(folder) and "accel_checkpoint.json" not in os.listdir(folder)
    assert {k: ours[k] for k in _SAME} == {k: reference[k] for k in _SAME}
    assert ours["step"] == 5 and ours["seen"] == 5


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_stateful_loader_resumes_from_the_reference_position(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    """``dl_state_dict.bin`` (torchdata's state) puts accel's loader after the 5 batches seen.
    accel's resumed run continues as the uninterrupted one; the reference's resume draws other
    dropout masks when its loader restarts (see docs/checkpointing.md)."""
    eco.require("accelerate", "torchdata")
    saved, reference, ours = _save_and_resume(eco, tmp_path, "--stateful")
    assert "dl_state_dict.bin" in os.listdir(tmp_path / "checkpoints" / "checkpoint_0")
    assert ours["losses"] == saved["losses"] and ours["weights"] == saved["weights"]
    for key in ("step", "seen", "lr"):
        assert ours[key] == reference[key]


@pytest.mark.slow
@pytest.mark.multiprocess
@pytest.mark.timeout(900)  # three 2-process runs; each eco.run has its own timeout
def test_a_two_process_reference_checkpoint_resumes_on_accel(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    eco.require("accelerate")
    torchrun = [*eco.TORCHRUN, "--nproc_per_node", "2", SCRIPT]
    eco.run([*torchrun, "save", str(tmp_path)], as_accelerate=False)
    reference = eco.run([*torchrun, "resume", str(tmp_path)], as_accelerate=False)
    launch = [*eco.LAUNCH, "--as_accelerate", "--cpu", "--num_processes", "2", SCRIPT]
    ours = eco.run([*launch, "resume", str(tmp_path)], as_accelerate=False)
    names = os.listdir(tmp_path / "checkpoints" / "checkpoint_0")
    assert {"random_states_0.pkl", "random_states_1.pkl"} <= set(names)
    assert ours["num_processes"] == 2
    assert {k: ours[k] for k in _SAME} == {k: reference[k] for k in _SAME}


# --------------------------------------------------------------------------- tampered files
@pytest.fixture(scope="module")
def reference_checkpoint(tmp_path_factory: pytest.TempPathFactory, eco: SimpleNamespace) -> Path:
    """A checkpoint the reference wrote (a model, an optimizer, a scheduler, a registered
    object), made once for the tests below."""
    eco.require("accelerate")
    project = tmp_path_factory.mktemp("reference")
    eco.run([sys.executable, SCRIPT, "save", str(project)], as_accelerate=False)
    return project / "checkpoints" / "checkpoint_0"


class _Counter:
    def __init__(self) -> None:
        self.seen = 0

    def state_dict(self) -> dict[str, int]:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seen = state["seen"]


def _accel_run() -> tuple[object, list[torch.nn.Module], list[object], _Counter]:
    """accel itself (no switch), with the objects of the script, before any load."""
    from accel import Accelerator

    torch.manual_seed(1)
    models = [
        torch.nn.Sequential(
            torch.nn.Linear(4, 16), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(16, 1)
        ),
        torch.nn.Linear(1, 1),
    ]
    opts = [
        torch.optim.AdamW(models[0].parameters(), lr=1e-2),
        torch.optim.SGD(models[1].parameters(), lr=0.1),
    ]
    scheduler = torch.optim.lr_scheduler.StepLR(opts[0], 2, gamma=0.5)
    accelerator = Accelerator(cpu=True)
    *models, opt0, opt1, scheduler = accelerator.prepare(*models, *opts, scheduler)
    counter = _Counter()
    accelerator.register_for_checkpointing(counter)
    return accelerator, models, [opt0, opt1, scheduler], counter


def _snapshot(models: list, others: list, counter: _Counter) -> list:
    return [
        [{k: v.clone() for k, v in m.state_dict().items()} for m in models],
        [repr(o.state_dict()) for o in others],
        counter.seen,
        torch.get_rng_state().clone(),
    ]


def _same(a: list, b: list) -> bool:
    weights = all(
        torch.equal(x[k], y[k]) for ma, mb in zip(a[0], b[0]) for x, y in [(ma, mb)] for k in x
    )
    return weights and a[1:3] == b[1:3] and torch.equal(a[3], b[3])


class _Payload:
    def __reduce__(self) -> tuple:
        return (os.system, ("touch pwned",))


def _tamper_pickle(folder: Path) -> type[Exception]:
    from accel_bigmodel import UntrustedPickleError

    torch.save({"seen": _Payload()}, folder / "custom_checkpoint_0.pkl")
    return UntrustedPickleError


def _tamper_random_states(folder: Path) -> type[Exception]:
    from accel_bigmodel import UntrustedPickleError

    numpy_state = ("MT19937", np.zeros(624, dtype=np.uint32), 0, 0, 0.0)
    state = {"step": 5, "numpy_random_seed": numpy_state, "random_state": _Payload()}
    torch.save(state, folder / "random_states_0.pkl")
    return UntrustedPickleError


def _tamper_safetensors(folder: Path) -> type[Exception]:
    path = folder / "model.safetensors"
    path.write_bytes(path.read_bytes()[:-40])
    return ValueError


def _tamper_symlink(folder: Path) -> type[Exception]:
    from accel.utils import CheckpointIntegrityError

    outside = folder.parent.parent / "elsewhere.bin"
    shutil.move(folder / "optimizer.bin", outside)
    os.symlink(outside, folder / "optimizer.bin")
    return CheckpointIntegrityError


@pytest.mark.parametrize(
    "tamper", [_tamper_pickle, _tamper_random_states, _tamper_safetensors, _tamper_symlink]
)
def test_a_tampered_reference_checkpoint_is_refused_and_changes_nothing(
    reference_checkpoint: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tamper
) -> None:
    folder = tmp_path / "checkpoints" / "checkpoint_0"
    shutil.copytree(reference_checkpoint, folder)
    error = tamper(folder)
    monkeypatch.chdir(tmp_path)
    accelerator, models, others, counter = _accel_run()
    before = _snapshot(models, others, counter)
    with pytest.raises(error) as raised:
        accelerator.load_state(str(folder))
    assert _same(before, _snapshot(models, others, counter)), raised.value
    assert not (tmp_path / "pwned").exists()
    # the untouched copy loads: the refusal came from the tampered file alone
    accelerator.load_state(str(reference_checkpoint))
    assert counter.seen == 5 and accelerator.step == 5


def test_tied_weights_stored_once_by_the_reference_load_into_both_names(
    tmp_path: Path, eco: SimpleNamespace
) -> None:
    """The reference writes a tied tensor once, under its first name, with no alias recorded;
    accel ties it back from the model (as the reference's loader does)."""
    eco.require("accelerate")
    from accel import Accelerator

    script = str(Path(__file__).parent / "scripts" / "reference_tied_save.py")
    folder = tmp_path / "tied"
    saved = eco.run([sys.executable, script, str(folder)], as_accelerate=False)
    torch.manual_seed(1)
    model = torch.nn.Module()
    model.emb = torch.nn.Embedding(5, 3)
    model.head = torch.nn.Linear(3, 5, bias=False)
    model.head.weight = model.emb.weight
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(model)
    accelerator.load_state(str(folder))
    assert model.emb.weight.sum().item() == saved["sum"]
    assert model.head.weight is model.emb.weight

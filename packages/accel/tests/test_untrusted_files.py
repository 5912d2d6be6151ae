"""Untrusted checkpoints never run code: every file ``load_state`` reads is refused when it
holds a pickled payload, unless the user opts in with ``trust_pickles=True``.

Each malicious file is a real pickle whose ``__reduce__`` would create a marker file; the
manifest's size is fixed after the file is replaced (whoever can write the file can fix the
manifest too), so only the loader stands between the file and the machine.
"""

from __future__ import annotations

import datetime
import json
import os
from pathlib import Path

import pytest
import torch
from accel_bigmodel import UntrustedPickleError
from accel_state import AcceleratorState, GradientState
from accel_state.testing import run_distributed
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel._training_checkpoints.files._manifest import file_checksum

SCRIPT = Path(__file__).parent / "scripts" / "untrusted_files.py"
EXTENSIONS = os.environ.get(
    "TORCH_EXTENSIONS_DIR", os.path.expanduser("~/.cache/accel/torch_extensions")
)
OPT_IN = "load_state(..., trust_pickles=True)"


class Payload:
    """Unpickling it runs ``touch <marker>``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class Holder:
    """A registered object whose state is whatever it was given."""

    def __init__(self, value: object = 0) -> None:
        self.value = value

    def state_dict(self):
        return {"value": self.value}

    def load_state_dict(self, state):
        self.value = state["value"]


@pytest.fixture
def saved(tmp_path):
    """An Accelerator with a model, optimizer, scheduler, dataloader and registered object,
    and a checkpoint of them with weights as a torch pickle."""
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1)
    loader = DataLoader(TensorDataset(torch.randn(8, 4)), batch_size=2)
    holder = Holder(1)
    acc.prepare(model, opt, sched, loader)
    acc.register_for_checkpointing(holder)
    folder = Path(acc.save_state(tmp_path / "ckpt", safe_serialization=False))
    return acc, folder, holder


def _replace(folder: Path, name: str, obj: object) -> None:
    path = folder / name
    torch.save(obj, path)
    manifest = json.loads((folder / "accel_checkpoint.json").read_text())
    manifest["files"][name] = path.stat().st_size
    manifest.get("checksums", {})[name] = file_checksum(str(path))
    (folder / "accel_checkpoint.json").write_text(json.dumps(manifest))


@pytest.mark.parametrize(
    "name",
    [
        "pytorch_model.bin",
        "optimizer.bin",
        "scheduler.bin",
        "dataloader.bin",
        "custom_checkpoint_0.pkl",
        "random_states_0.pkl",
    ],
)
def test_every_checkpoint_pickle_with_a_payload_is_refused(saved, tmp_path, name):
    acc, folder, _ = saved
    marker = tmp_path / "marker"
    _replace(folder, name, {"state": Payload(marker)})
    with pytest.raises(UntrustedPickleError) as info:
        acc.load_state(folder)
    assert not marker.exists()
    message = str(info.value)
    assert str(folder / name) in message and "posix.system" in message and OPT_IN in message


def test_a_trusted_unusual_file_loads_only_when_opted_in(saved):
    acc, folder, holder = saved
    _replace(folder, "custom_checkpoint_0.pkl", {"value": datetime.date(2024, 5, 1)})
    with pytest.raises(UntrustedPickleError, match="datetime.date"):
        acc.load_state(folder)
    assert holder.value == 1
    acc.load_state(folder, trust_pickles=True)
    assert holder.value == datetime.date(2024, 5, 1)


def test_weights_only_cannot_be_turned_off_through_load_kwargs(saved):
    acc, folder, _ = saved
    with pytest.raises(ValueError, match="trust_pickles=True"):
        acc.load_state(folder, load_kwargs={"weights_only": False})


def test_trust_pickles_is_keyword_only_and_documented():
    import inspect

    parameter = inspect.signature(Accelerator.load_state).parameters["trust_pickles"]
    assert parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is False
    assert "trust_pickles" in (Accelerator.load_state.__doc__ or "")


@pytest.mark.multiprocess
@pytest.mark.slow
@pytest.mark.timeout(960)
def test_deepspeed_checkpoint_payloads_are_refused_before_deepspeed_reads_them(tmp_path):
    pytest.importorskip("deepspeed", reason="needs deepspeed: pip install 'accel-torch[deepspeed]'")
    env = {"TORCH_EXTENSIONS_DIR": EXTENSIONS}
    result = run_distributed(
        SCRIPT, str(tmp_path), "deepspeed", num_processes=1, timeout=900, env=env
    )
    for name in ("real_checkpoints_load", "payloads_refused", "opt_in"):
        assert f"PASSED check_deepspeed_{name}" in result.stdout, result.stdout + result.stderr


@pytest.mark.multiprocess
@pytest.mark.timeout(480)
def test_fsdp_checkpoint_payloads_are_refused(tmp_path):
    result = run_distributed(SCRIPT, str(tmp_path), "fsdp", num_processes=2, timeout=420)
    names = (
        "metadata_payloads_refused",
        "path_outside_refused",
        "opt_in",
        "full_optimizer_payload_refused",
    )
    for name in names:
        assert result.stdout.count(f"PASSED check_fsdp_{name}") == 2, result.stdout + result.stderr

"""save_state / load_state with stateful prepared loaders (torchdata's StatefulDataLoader):
a run stopped mid-epoch and resumed in a fresh process sees the same batches and ends with
bit-identical weights, with a random sampler and workers that augment from their own RNG."""

from pathlib import Path

import pytest
import torch
from accel_state import AcceleratorState, GradientState
from accel_state.testing import run_distributed
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel.utils import DataLoaderConfiguration

pytest.importorskip("torchdata.stateful_dataloader", reason="needs accel-data[stateful]")

SCRIPT = Path(__file__).parent / "scripts" / "stateful_resume.py"


@pytest.mark.multiprocess
@pytest.mark.parametrize(
    ("num_processes", "num_workers", "mode"),
    [(1, 0, "shard"), (1, 2, "shard"), (2, 2, "shard"), (2, 2, "dispatch")],
    ids=["1proc-0w", "1proc-2w", "2proc-2w", "2proc-2w-dispatch"],
)
def test_fresh_process_resume_is_exact(
    tmp_path: Path, num_processes: int, num_workers: int, mode: str
) -> None:
    args = (str(tmp_path), str(num_workers), mode)
    # Both runs take about 25 s (45 s on a busy machine); each may take 140 s, so a hung run
    # fails here, within the test's 300 s, with every process's stacks in the message.
    run_distributed(SCRIPT, "full", *args, num_processes=num_processes, timeout=140)
    if num_processes > 1:
        saved = {p.name for p in (tmp_path / "checkpoints" / "checkpoint_0").iterdir()}
        assert {"dataloader_0_process_0.bin", "dataloader_0_process_1.bin"} <= saved, saved
    result = run_distributed(SCRIPT, "resume", *args, num_processes=num_processes, timeout=140)
    for rank in range(num_processes):
        assert f"PASSED stateful_resume rank={rank} workers={num_workers}" in result.stdout, (
            result.stdout + result.stderr
        )


def _prepared(stateful: bool) -> tuple[Accelerator, torch.nn.Module, DataLoader]:
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    acc = Accelerator(dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=stateful))
    data = TensorDataset(torch.arange(12.0).unsqueeze(1))
    model, loader = acc.prepare(torch.nn.Linear(1, 1), DataLoader(data, batch_size=2, shuffle=True))
    return acc, model, loader


def test_plain_loader_refuses_a_stateful_checkpoint_and_changes_nothing(tmp_path: Path) -> None:
    acc, _, loader = _prepared(stateful=True)
    batches = iter(loader)
    next(batches)
    acc.save_state(str(tmp_path / "ckpt"))
    acc, model, loader = _prepared(stateful=False)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(ValueError, match=r"use_stateful_dataloader=True\), as the run that saved"):
        acc.load_state(str(tmp_path / "ckpt"))
    assert all(torch.equal(v, model.state_dict()[k]) for k, v in before.items())
    assert loader.state_dict()["batches_yielded"] == 0

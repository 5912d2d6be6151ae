"""LocalSGD: weights equal a hand-written local SGD on 2 gloo processes; refusals."""

from pathlib import Path

import pytest
import torch
from accel_state import DeepSpeedPlugin, DistributedType
from accel_state.testing import run_distributed

import accel
from accel import Accelerator
from accel.local_sgd import LocalSGD

SCRIPT = Path(__file__).parent / "scripts" / "local_sgd_checks.py"


@pytest.mark.multiprocess
def test_two_processes_match_hand_written_local_sgd_and_ddp() -> None:
    result = run_distributed(SCRIPT, num_processes=2, timeout=240)
    for check in ("local_sgd k=1", "local_sgd k=3", "disabled_is_ddp"):
        for rank in (0, 1):
            assert f"PASSED {check} rank={rank}" in result.stdout, result.stdout + result.stderr


def test_exported_at_both_paths() -> None:
    assert accel.LocalSGD is LocalSGD
    from accel.local_sgd import Accelerator as Facade
    from accel.local_sgd import DistributedType as Kind

    assert Facade is Accelerator and Kind is DistributedType


def test_one_process_trains_as_without_it() -> None:
    acc = Accelerator(cpu=True)
    model = acc.prepare(torch.nn.Linear(2, 1))
    before = [p.detach().clone() for p in model.parameters()]
    with LocalSGD(acc, model, local_sgd_steps=1) as local_sgd:
        assert not local_sgd.enabled
        local_sgd.step()
    assert local_sgd.num_steps == 1
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))


def test_deepspeed_is_refused() -> None:
    acc = Accelerator(cpu=True, deepspeed_plugin=DeepSpeedPlugin())
    with pytest.raises(NotImplementedError, match="distributed type is DEEPSPEED.*use DDP"):
        LocalSGD(acc, torch.nn.Linear(2, 1), local_sgd_steps=4)


@pytest.mark.parametrize("steps", [0, -1, 2.5, True, "4"])
def test_bad_step_count_is_refused(steps: object) -> None:
    acc = Accelerator(cpu=True)
    with pytest.raises(ValueError, match=rf"an int >= 1; got {steps!r}"):
        LocalSGD(acc, torch.nn.Linear(2, 1), local_sgd_steps=steps)  # type: ignore[arg-type]

"""``save_state`` / ``load_state`` on the device: training resumes bit-identically.

The model has dropout, so each step draws from the device's random generator (CUDA's on a GPU);
AdamW keeps its moments on the device and fp16 adds a grad scaler. A run trains 6 steps; a
second run trains 3, saves, is replaced by a fresh Accelerator and model seeded differently,
loads and trains the last 3. Weights, optimizer moments, scaler and the next random draws must
be bit-identical to the uninterrupted run's.
"""

from __future__ import annotations

import pytest
import torch
from _gpu_models import regression_data, regression_mlp
from accel import Accelerator
from accel.utils import set_seed
from accel_state import AcceleratorState, GradientState

STEPS = 6


def _fresh(device: str, mixed_precision: str, seed: int):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    accelerator = Accelerator(mixed_precision=mixed_precision, cpu=device == "cpu")
    set_seed(seed)
    model = regression_mlp(dropout=0.25)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model, optimizer = accelerator.prepare(model, optimizer)
    return accelerator, model, optimizer


def _steps(accelerator, model, optimizer, count: int) -> None:
    x, y = (t.to(accelerator.device) for t in regression_data(64))
    model.train()
    for _ in range(count):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()


def _snapshot(accelerator, model, optimizer) -> dict[str, torch.Tensor]:
    state = {f"w.{k}": v.detach().clone() for k, v in model.state_dict().items()}
    for i, moments in enumerate(optimizer.state_dict()["state"].values()):
        state.update({f"opt.{i}.{k}": v.clone() for k, v in moments.items()})
    device = accelerator.device
    state["draw.device"] = torch.rand(8, device=device)
    state["draw.cpu"] = torch.rand(8)
    if accelerator.scaler is not None:
        state["scale"] = torch.tensor(accelerator.scaler.get_scale())
    return state


@pytest.mark.parametrize(
    ("device", "mixed_precision"),
    [
        pytest.param("cpu", "no", id="cpu-fp32"),
        pytest.param("cuda", "no", id="cuda-fp32", marks=pytest.mark.cuda),
        pytest.param("cuda", "fp16", id="cuda-fp16", marks=pytest.mark.cuda),
    ],
)
def test_resume_is_bit_identical(tmp_path, device, mixed_precision):
    full = _fresh(device, mixed_precision, seed=7)
    _steps(*full, STEPS)
    expected = _snapshot(*full)

    first = _fresh(device, mixed_precision, seed=7)
    _steps(*first, STEPS // 2)
    saved = first[0].save_state(tmp_path / "state")

    resumed = _fresh(device, mixed_precision, seed=12345)
    resumed[0].load_state(saved)
    moments = next(iter(resumed[2].state_dict()["state"].values()))
    assert all(v.device.type == device for k, v in moments.items() if k != "step"), moments
    _steps(*resumed, STEPS - STEPS // 2)
    actual = _snapshot(*resumed)
    assert actual.keys() == expected.keys()
    different = [k for k in expected if not torch.equal(actual[k], expected[k])]
    assert not different, different

"""fp16 with the grad scaler and bf16 train like fp32, within stated tolerances.

Each run starts from the same weights and data and takes the same SGD steps; the check compares
the weight updates (final minus initial weights, all layers together) of the mixed-precision run
with those of the fp32 run on the same device. Tolerances, relative L2 of the updates: fp16
(10-bit mantissa, loss scaled) 1e-2, bf16 (7-bit mantissa) 3e-2; bf16 measured
6.4e-3 on a CPU.
"""

from __future__ import annotations

import pytest
import torch
from _gpu_models import DEVICES, regression_data, regression_mlp, relative
from accel import Accelerator

STEPS = 30
TOLERANCE = {"fp16": 1e-2, "bf16": 3e-2}


def _train(mixed_precision: str, device: str) -> tuple[torch.Tensor, list[float], Accelerator]:
    accelerator = Accelerator(mixed_precision=mixed_precision, cpu=device == "cpu")
    assert accelerator.device.type == device
    model = regression_mlp()
    start = torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    model, optimizer = accelerator.prepare(model, optimizer)
    x, y = (t.to(accelerator.device) for t in regression_data())
    losses = []
    for _ in range(STEPS):
        loss = torch.nn.functional.mse_loss(model(x).float(), y)
        accelerator.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    end = torch.cat([p.detach().reshape(-1).cpu() for p in model.parameters()])
    return end - start, losses, accelerator


def _compare(mixed_precision: str, device: str) -> Accelerator:
    reference, reference_losses, _ = _train("no", device)
    from accel_state import AcceleratorState, GradientState

    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    update, losses, accelerator = _train(mixed_precision, device)
    assert losses[-1] < 0.8 * losses[0], losses
    error = relative(update, reference)
    print(f"{mixed_precision} on {device}: relative L2 of the updates vs fp32 {error:.2e}")
    assert error < TOLERANCE[mixed_precision], (error, losses[-1], reference_losses[-1])
    return accelerator


@pytest.mark.parametrize("device", DEVICES)
def test_bf16_trains_like_fp32(device):
    _compare("bf16", device)


@pytest.mark.cuda
def test_fp16_with_the_grad_scaler_trains_like_fp32():
    accelerator = _compare("fp16", "cuda")
    assert accelerator.scaler is not None and accelerator.scaler.is_enabled()
    assert accelerator.scaler.get_scale() > 1.0


@pytest.mark.cuda
def test_fp16_skips_the_step_of_an_overflowing_loss():
    accelerator = Accelerator(mixed_precision="fp16")
    model = regression_mlp().cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer = accelerator.prepare(model, optimizer)
    x, y = (t.cuda() for t in regression_data())
    before = [p.detach().clone() for p in model.parameters()]
    scale = accelerator.scaler.get_scale()
    loss = torch.nn.functional.mse_loss(model(x).float(), y) * float("inf")
    accelerator.backward(loss)
    optimizer.step()
    optimizer.zero_grad()
    assert accelerator.optimizer_step_was_skipped
    assert all(torch.equal(a, b) for a, b in zip(before, model.parameters()))
    assert accelerator.scaler.get_scale() < scale

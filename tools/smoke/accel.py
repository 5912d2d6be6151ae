"""Smoke run of accel installed alone (no extra): a few training steps through the Accelerator,
then a checkpoint saved and restored.

Run: ``python tools/smoke/accel.py`` (prints ``ok: accel`` on success).
"""

from __future__ import annotations

import tempfile

import torch
from accel import Accelerator
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    torch.manual_seed(0)
    accelerator = Accelerator(cpu=True, gradient_accumulation_steps=2)
    inputs = torch.randn(64, 4)
    targets = inputs @ torch.tensor([[1.0], [-2.0], [0.5], [3.0]])
    loader = DataLoader(TensorDataset(inputs, targets), batch_size=8, shuffle=True)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    losses = []
    for _ in range(5):
        for x, y in loader:
            with accelerator.accumulate(model):
                loss = torch.nn.functional.mse_loss(model(x), y)
                accelerator.backward(loss)
                optimizer.step()
                optimizer.zero_grad()
            losses.append(accelerator.gather(loss.detach()).mean().item())
    assert losses[-1] < 0.5 * losses[0], losses

    with tempfile.TemporaryDirectory() as tmp:
        accelerator.save_state(tmp)
        saved = {k: v.clone() for k, v in model.state_dict().items()}
        with torch.no_grad():
            for param in model.parameters():
                param.add_(1.0)
        accelerator.load_state(tmp)
        for key, value in model.state_dict().items():
            torch.testing.assert_close(value, saved[key])
    print("ok: accel")


if __name__ == "__main__":
    main()

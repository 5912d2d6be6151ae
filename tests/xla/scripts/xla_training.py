"""Started by ``accel launch --tpu --main_training_function run_checks`` inside the XLA
environment (PJRT_DEVICE=CPU): detection, a prepared training loop whose
weights must equal plain torch's, the device loader, gather and reduce. Prints one line per
check; any failed check raises."""

from __future__ import annotations

import copy
import os

import torch
from accel import Accelerator
from accel_state import DistributedType, PartialState
from torch.utils.data import DataLoader, TensorDataset


def plain_training(model: torch.nn.Module, data: TensorDataset, steps: int) -> torch.nn.Module:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in DataLoader(data, batch_size=4):
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return model


def run_checks() -> None:
    print("launched by:", os.environ.get("ACCEL_DISTRIBUTED_TYPE"), "ordinal", ordinal())
    state = PartialState()
    assert state.distributed_type == DistributedType.XLA, state.distributed_type
    assert state.device.type == "xla", state.device
    assert state.backend == "xla" and state.num_processes == 1 and state.process_index == 0
    print("detection:", state.distributed_type.value, state.device)

    torch.manual_seed(0)
    data = TensorDataset(torch.randn(16, 4), torch.randn(16, 1))
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    expected = plain_training(copy.deepcopy(model), data, steps=4)

    accelerator = Accelerator()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model, optimizer, loader = accelerator.prepare(model, optimizer, DataLoader(data, batch_size=4))
    assert type(loader).__name__ == "MpDeviceLoaderWrapper", type(loader)
    assert len(loader) == 4 and loader.total_batch_size == 4
    print("loader:", loader)
    for step, (x, y) in enumerate(loader):
        assert x.device.type == "xla", x.device
        loss = torch.nn.functional.mse_loss(model(x), y)
        accelerator.backward(loss)
        if step == 3:
            norm = accelerator.clip_grad_norm_(model.parameters(), max_norm=1e6)
            assert torch.isfinite(norm.cpu())
        optimizer.step()
        optimizer.zero_grad()
    for got, want in zip(model.parameters(), expected.parameters()):
        assert got.device.type == "xla"
        torch.testing.assert_close(got.detach().cpu(), want.detach(), rtol=1e-5, atol=1e-6)
    print("training: 4 steps match plain torch")

    value = torch.tensor([1.0, 2.0], device=accelerator.device)
    gathered = accelerator.gather(value)
    reduced = accelerator.reduce(value, reduction="sum")
    assert gathered.device.type == "xla" and reduced.device.type == "xla"
    assert gathered.cpu().tolist() == [1.0, 2.0] and reduced.cpu().tolist() == [1.0, 2.0]
    print("collectives: gather", gathered.cpu().tolist(), "reduce", reduced.cpu().tolist())
    accelerator.wait_for_everyone()
    print("XLA CHECKS PASSED")


def ordinal() -> int:
    import torch_xla.runtime as xr

    return int(xr.global_ordinal())


if __name__ == "__main__":
    run_checks()

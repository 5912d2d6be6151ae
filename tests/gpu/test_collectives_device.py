"""gather, reduce, pad_across_processes and friends on device tensors, in one process.

Two processes would need two GPUs (NCCL refuses two ranks on one device); the multi-process
paths run on the CPU in the packages' suites. Here each operation must keep a device tensor on
its device, with its values and dtype, through the nested structures the operations accept.
"""

from __future__ import annotations

import pytest
import torch
from _gpu_models import DEVICES
from accel import Accelerator
from accel.utils import (
    broadcast,
    concatenate,
    gather,
    gather_object,
    pad_across_processes,
    reduce,
    send_to_device,
)


@pytest.mark.parametrize("device", DEVICES)
def test_operations_keep_device_tensors_on_the_device(device):
    accelerator = Accelerator(cpu=device == "cpu")
    assert accelerator.device.type == device and accelerator.num_processes == 1
    data = {
        "a": torch.arange(6, dtype=torch.float32, device=device).reshape(2, 3),
        "b": [torch.ones(3, dtype=torch.bfloat16, device=device)],
    }
    for result in (gather(data), broadcast(data), reduce(data, "sum"), reduce(data, "mean")):
        assert result["a"].device.type == device and result["b"][0].dtype == torch.bfloat16
        assert torch.equal(result["a"], data["a"]) and torch.equal(result["b"][0], data["b"][0])
    padded = pad_across_processes(data["a"], dim=1, pad_index=-1)
    assert padded.device.type == device and torch.equal(padded, data["a"])
    assert gather_object([{"rank": 0}]) == [{"rank": 0}]
    joined = concatenate([data["a"], data["a"]])
    assert joined.device.type == device and joined.shape == (4, 3)
    moved = send_to_device({"x": torch.ones(2)}, accelerator.device, non_blocking=True)
    assert moved["x"].device.type == device


@pytest.mark.parametrize("device", DEVICES)
def test_gather_for_metrics_on_the_device(device):
    accelerator = Accelerator(cpu=device == "cpu")
    loader = torch.utils.data.DataLoader(torch.arange(10), batch_size=4)
    loader = accelerator.prepare(loader)
    seen = []
    for batch in loader:
        assert batch.device.type == device
        seen.append(accelerator.gather_for_metrics(batch))
    assert torch.equal(torch.cat(seen).cpu(), torch.arange(10))

"""One gloo process: model_has_dtensor sees a parameter turned into a DTensor."""

import os

import torch
import torch.distributed as dist
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Replicate, distribute_tensor

from accel.utils import model_has_dtensor

os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
dist.init_process_group("gloo", rank=0, world_size=1)
model = torch.nn.Linear(2, 2)
assert model_has_dtensor(model) is False
mesh = init_device_mesh("cpu", (1,))
model.weight = torch.nn.Parameter(distribute_tensor(model.weight.detach(), mesh, [Replicate()]))
assert model_has_dtensor(model) is True
dist.destroy_process_group()
print("DTENSOR OK", flush=True)

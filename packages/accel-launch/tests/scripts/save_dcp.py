"""Save a model sharded over the processes with torch.distributed.checkpoint (as FSDP does)."""

import sys

import torch
import torch.distributed.checkpoint as dcp
from accel_state import PartialState
from torch.distributed.device_mesh import init_device_mesh
from torch.distributed.tensor import Shard, distribute_tensor

state = PartialState()
torch.manual_seed(0)
full = {"layer.weight": torch.randn(6, 4), "layer.bias": torch.randn(6), "head": torch.randn(3, 4)}
mesh = init_device_mesh("cpu", (state.num_processes,))
sharded = {k: distribute_tensor(v, mesh, [Shard(0)]) for k, v in full.items()}
dcp.save({"model": sharded, "step": 7}, checkpoint_id=sys.argv[1])
if state.is_main_process:
    torch.save(full, sys.argv[2])

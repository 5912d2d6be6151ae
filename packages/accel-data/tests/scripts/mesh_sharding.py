"""Run on 2 processes: prepare_data_loader with a real DeviceMesh. The ranks of a tensor-parallel
group read the same batches; the ranks of a data-parallel dimension read different ones."""

from __future__ import annotations

import torch
from accel_state import PartialState
from torch.distributed.device_mesh import init_device_mesh
from torch.utils.data import DataLoader

from accel_data import prepare_data_loader

state = PartialState()
rank, world = state.process_index, state.num_processes
assert world == 2, world


def batches_with(dim_name: str) -> list[list[int]]:
    mesh = init_device_mesh("cpu", (world,), mesh_dim_names=(dim_name,))
    prepared = prepare_data_loader(DataLoader(list(range(8)), batch_size=2), torch_device_mesh=mesh)
    return [b.tolist() for b in prepared]


for dim_name, want in (
    ("tp", {0: [[0, 1], [2, 3], [4, 5], [6, 7]], 1: [[0, 1], [2, 3], [4, 5], [6, 7]]}),
    ("dp_shard", {0: [[0, 1], [4, 5]], 1: [[2, 3], [6, 7]]}),
):
    got = batches_with(dim_name)
    parts: list = [None] * world
    torch.distributed.all_gather_object(parts, got)
    status = "ok" if parts == [want[0], want[1]] else f"FAIL {parts}"
    print(f"rank {rank}: mesh {dim_name}: {status}")

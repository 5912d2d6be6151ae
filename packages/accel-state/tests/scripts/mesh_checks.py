"""Run on 4 processes: ParallelismConfig.build_device_mesh lays out the processes and joins
the data-parallel dimensions into ``dp``, ``dp_shard_cp`` and ``dp_cp``."""

import warnings

import torch.distributed as dist

from accel_state import ParallelismConfig

# Slicing a flattened dimension from the root mesh warns in recent torch; the names are the
# layout's contract, so read them anyway.
warnings.filterwarnings("ignore", message="Slicing a flattened dim")

dist.init_process_group("gloo")
rank = dist.get_rank()

LAYOUTS = [
    # sizes (replicate, shard, tp, cp), mesh names, {joint dimension: its size}
    ((4, 1, 1, 1), ("dp_replicate",), {"dp": 4, "dp_cp": 4}),
    ((1, 4, 1, 1), ("dp_shard",), {"dp": 4, "dp_shard_cp": 4, "dp_cp": 4}),
    ((2, 2, 1, 1), ("dp_replicate", "dp_shard"), {"dp": 4, "dp_shard_cp": 2, "dp_cp": 4}),
    ((1, 2, 2, 1), ("dp_shard", "tp"), {"dp": 2, "dp_shard_cp": 2, "dp_cp": 2}),
    ((1, 2, 1, 2), ("dp_shard", "cp"), {"dp": 2, "dp_shard_cp": 4, "dp_cp": 4}),
    ((1, 1, 4, 1), ("tp",), {}),
]
for (replicate, shard, tp, cp), names, joints in LAYOUTS:
    config = ParallelismConfig(
        dp_replicate_size=replicate, dp_shard_size=shard, tp_size=tp, cp_size=cp
    )
    mesh = config.build_device_mesh("cpu")
    assert mesh is not None
    assert (mesh.mesh_dim_names, tuple(mesh.shape)) == (
        names,
        tuple(config.sizes[n] for n in names),
    )
    for name, size in joints.items():
        assert mesh[name].size() == size, (names, name, mesh[name].size())
    if "tp" in names:
        # Row-major: tensor-parallel partners are neighbours.
        assert mesh["tp"].get_local_rank() == config.local_rank("tp", rank)
    if "tp" in names and "dp" in joints:
        assert mesh["dp"].get_local_rank() == rank // tp, (rank, mesh["dp"].get_local_rank())

# The world size of the process group is checked; DeepSpeed's sequence split builds no mesh.
try:
    ParallelismConfig(dp_shard_size=2).build_device_mesh("cpu")
except ValueError as error:
    assert "equal the number of processes (4)" in str(error), error
else:
    raise AssertionError("a layout of 2 processes was built on 4")
assert ParallelismConfig(sp_size=4).build_device_mesh("cpu") is None
dist.barrier()
print(f"rank {rank} OK", flush=True)
dist.destroy_process_group()

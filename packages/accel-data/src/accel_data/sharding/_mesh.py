"""Which processes read the same batches under a ``torch.distributed.DeviceMesh``."""

from __future__ import annotations

from typing import Any

from accel_state import DistributedType, PartialState


def _dim_size(mesh: Any, name: str) -> int:
    names = tuple(getattr(mesh, "mesh_dim_names", None) or ())
    return int(mesh[name].size()) if name in names else 1


def mesh_data_ranks(mesh: Any, num_processes: int, process_index: int) -> tuple[int, int]:
    """``(num_processes, process_index)`` of the data-parallel replicas of ``mesh``.

    The ranks of one tensor-parallel (and context-parallel) group must read the same batches,
    so they count as one data process; the number of data processes is the product of the
    ``dp_replicate`` and ``dp_shard`` dimensions. Under DeepSpeed, which shards the optimizer
    over the data-parallel ranks itself, only the ``tp`` dimension is divided out.

    Args:
        mesh: A ``DeviceMesh`` with named dimensions.
        num_processes: Number of processes of the run.
        process_index: Index of this process.

    Returns:
        The number of data processes and the index of this one among them.
    """
    if not getattr(mesh, "mesh_dim_names", None):
        raise ValueError(
            "prepare_data_loader reads the data-parallel layout from the names of the mesh's "
            f"dimensions; the mesh {mesh!r} has none. Build it with mesh_dim_names, e.g. "
            "init_device_mesh('cpu', (2, 2), mesh_dim_names=('dp_shard', 'tp'))."
        )
    tp = _dim_size(mesh, "tp")
    if PartialState().distributed_type == DistributedType.DEEPSPEED:
        return num_processes // tp, process_index // tp
    cp = _dim_size(mesh, "cp")
    data_processes = _dim_size(mesh, "dp_replicate") * _dim_size(mesh, "dp_shard")
    return data_processes, process_index // (tp * cp)

"""N-D parallelism settings: ``ParallelismConfig`` (data replicate x data shard x context x
tensor) and ``TorchTensorParallelPlugin``.

``ParallelismConfig.build_device_mesh`` lays the processes out on a ``torch`` ``DeviceMesh``
whose dimensions are named ``dp_replicate``, ``dp_shard``, ``cp`` and ``tp`` (outermost
first; dimensions of size 1 are left out, except `dp_shard` next to `dp_replicate`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import environment_variables as env
from ._kwargs import KwargsHandler

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

_SIZE_VARIABLES = {
    "dp_replicate_size": env.ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE,
    "dp_shard_size": env.ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE,
    "tp_size": env.ACCEL_PARALLELISM_CONFIG_TP_SIZE,
    "cp_size": env.ACCEL_PARALLELISM_CONFIG_CP_SIZE,
}
MESH_DIMS = ("dp_replicate", "dp_shard", "cp", "tp")
"""Mesh dimension names, outermost (slowest-varying rank) first."""


def _size(value: int | None, name: str) -> int:
    if value is None:
        value = env.read_env(_SIZE_VARIABLES[name], 1)
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(
            f"ParallelismConfig.{name} must be an integer >= 1; got {value!r}. Use 1 to leave "
            "that dimension out."
        )
    return value


@dataclass
class TorchTensorParallelPlugin(KwargsHandler):
    """Tensor parallelism with ``torch.distributed.tensor.parallel``.

    The model's linear layers are split over ``tp_size`` processes following ``tp_plan``
    (``parallelize_module``), or the model's own ``_tp_plan`` (as ``transformers`` models
    define it) when no plan is given.
    """

    tp_size: int = 1
    """Number of processes each tensor-parallel layer is split over."""
    tp_plan: dict[str, Any] | None = None
    """Module name (``fnmatch`` pattern) -> ``"colwise"``, ``"rowwise"``, ``"sequence"`` or a
    torch ``ParallelStyle``."""

    def __post_init__(self) -> None:
        self.tp_size = _size(self.tp_size, "tp_size")


@dataclass
class ParallelismConfig:
    """How the processes are split between the kinds of parallelism.

    The product of the four sizes must equal the number of processes. ``dp_replicate_size`` x
    ``dp_shard_size`` > 1 with both above 1 is hybrid sharding (HSDP): each group of
    ``dp_shard_size`` processes shards the model, and the groups replicate it. Fields left at
    ``None`` take ``ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE`` (and the ``_DP_SHARD_SIZE``,
    ``_TP_SIZE``, ``_CP_SIZE`` variables; or the reference's ``PARALLELISM_CONFIG_*``), else 1.
    """

    dp_replicate_size: int | None = None
    """Number of replicas of the (sharded) model; gradients are all-reduced between them."""
    dp_shard_size: int | None = None
    """Number of processes one replica is sharded over (FSDP). When neither this nor
    ``ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE`` is set, it takes the processes the other sizes
    leave (number of processes / the product of the others)."""
    tp_size: int | None = None
    """Number of processes each layer is split over (tensor parallelism)."""
    cp_size: int | None = None
    """Number of processes a sequence is split over (context parallelism)."""
    tp_handler: TorchTensorParallelPlugin | None = None
    """Tensor-parallel plan; default: a ``TorchTensorParallelPlugin`` of ``tp_size``."""

    def __post_init__(self) -> None:
        self.dp_replicate_size = _size(self.dp_replicate_size, "dp_replicate_size")
        self._auto_shard = self.dp_shard_size is None and not env.is_set(
            env.ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE
        )
        self.dp_shard_size = _size(self.dp_shard_size, "dp_shard_size")
        self.tp_size = _size(self.tp_size, "tp_size")
        self.cp_size = _size(self.cp_size, "cp_size")
        if self.tp_handler is None:
            self.tp_handler = TorchTensorParallelPlugin(tp_size=self.tp_size)
        elif self.tp_handler.tp_size != self.tp_size:
            if self.tp_size == 1:
                self.tp_size = self.tp_handler.tp_size
            else:
                raise ValueError(
                    f"ParallelismConfig.tp_size ({self.tp_size}) and tp_handler.tp_size "
                    f"({self.tp_handler.tp_size}) differ. Set the size in one place."
                )

    @property
    def sizes(self) -> dict[str, int]:
        """Size of every mesh dimension, outermost first."""
        return {
            "dp_replicate": self.dp_replicate_size,  # type: ignore[dict-item]
            "dp_shard": self.dp_shard_size,  # type: ignore[dict-item]
            "cp": self.cp_size,  # type: ignore[dict-item]
            "tp": self.tp_size,  # type: ignore[dict-item]
        }

    @property
    def total_size(self) -> int:
        """Number of processes the layout needs."""
        total = 1
        for size in self.sizes.values():
            total *= size
        return total

    @property
    def dp_replicate_enabled(self) -> bool:
        """Whether the model is replicated (plain or hybrid data parallelism)."""
        return self.sizes["dp_replicate"] > 1

    @property
    def fsdp_enabled(self) -> bool:
        """Whether the model is sharded over data-parallel processes."""
        return self.sizes["dp_shard"] > 1

    @property
    def tp_enabled(self) -> bool:
        """Whether layers are split with tensor parallelism."""
        return self.sizes["tp"] > 1

    @property
    def cp_enabled(self) -> bool:
        """Whether sequences are split with context parallelism."""
        return self.sizes["cp"] > 1

    @property
    def mesh_dim_names(self) -> tuple[str, ...]:
        """Names of the mesh dimensions that are built: those of size > 1, plus ``dp_shard``
        whenever ``dp_replicate`` is built (FSDP2 replicates over a 2-D mesh) or nothing else is.
        """
        sizes = self.sizes
        names = tuple(
            name
            for name, size in sizes.items()
            if size > 1 or (name == "dp_shard" and sizes["dp_replicate"] > 1)
        )
        return names or ("dp_shard",)

    @property
    def dp_dim_names(self) -> tuple[str, ...]:
        """Mesh dimensions over which data is split (the FSDP / HSDP mesh)."""
        names = tuple(n for n in ("dp_replicate", "dp_shard") if n in self.mesh_dim_names)
        return names

    def validate(self, num_processes: int) -> None:
        """Check that the layout fits ``num_processes`` processes.

        Raises:
            ValueError: when the product of the sizes is not ``num_processes``.
        """
        others = self.total_size // self.sizes["dp_shard"]
        if self._auto_shard and num_processes % others == 0:
            self.dp_shard_size = num_processes // others
        if self.total_size != num_processes:
            raise ValueError(
                "ParallelismConfig needs dp_replicate_size * dp_shard_size * cp_size * tp_size "
                f"to equal the number of processes ({num_processes}); got {self.sizes} "
                f"(product {self.total_size}). Change the sizes or the process count."
            )

    def build_device_mesh(self, device_type: str, num_processes: int | None = None) -> DeviceMesh:
        """Build the ``DeviceMesh`` of this layout over the current process group.

        Args:
            device_type: ``"cpu"``, ``"cuda"`` ...
            num_processes: Checked against :attr:`total_size` (default: the world size).
        """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        world = num_processes if num_processes is not None else dist.get_world_size()
        self.validate(world)
        names = self.mesh_dim_names
        shape = tuple(self.sizes[name] for name in names)
        return init_device_mesh(device_type, shape, mesh_dim_names=names)

"""N-D parallelism settings: ``ParallelismConfig`` (data replicate x data shard x context x
sequence x tensor) and ``TorchTensorParallelPlugin``.

``ParallelismConfig.build_device_mesh`` lays the processes out on a ``torch`` ``DeviceMesh``
whose dimensions are named ``dp_replicate``, ``dp_shard``, ``cp``, ``sp`` and ``tp`` (outermost
first; dimensions of size 1 are left out), and joins some of them into the flattened dimensions
``dp``, ``dp_shard_cp`` and ``dp_cp``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .. import environment_variables as env
from .._env._contract import env_text
from ._kwargs import KwargsHandler

if TYPE_CHECKING:
    from torch.distributed.device_mesh import DeviceMesh

_SIZE_VARIABLES = {
    "dp_replicate_size": env.ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE,
    "dp_shard_size": env.ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE,
    "tp_size": env.ACCEL_PARALLELISM_CONFIG_TP_SIZE,
    "cp_size": env.ACCEL_PARALLELISM_CONFIG_CP_SIZE,
    "sp_size": env.ACCEL_PARALLELISM_CONFIG_SP_SIZE,
}
_SP_ATTN_BUILTIN = ("flash_attention_2", "flash_attention_3", "sdpa")
MESH_DIMS = ("dp_replicate", "dp_shard", "cp", "sp", "tp")
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


def _backend(value: str | None, variable: env.EnvironmentVariable, name: str) -> str:
    text = env.read_env(variable, variable.choices[0]) if value is None else value
    if text not in variable.choices:
        raise ValueError(
            f"ParallelismConfig.{name} must be one of {list(variable.choices)}; got {text!r}. "
            f"Use {variable.choices[0]!r}."
        )
    return str(text)


@dataclass
class TorchTensorParallelConfig:
    """Options of torch tensor parallelism (``ParallelismConfig(tp_handler=...)``)."""

    enable_async_tp: bool = False
    """Overlap tensor-parallel communication with computation (torch's async TP). Refused when
    True: accel does not enable it yet."""

    def __post_init__(self) -> None:
        if self.enable_async_tp:
            raise ValueError(
                "TorchTensorParallelConfig.enable_async_tp=True asks for asynchronous tensor "
                "parallelism, which accel does not enable (it needs symmetric-memory CUDA "
                "kernels). Set enable_async_tp=False."
            )


@dataclass
class TorchContextParallelConfig:
    """Options of torch context parallelism (``ParallelismConfig(cp_handler=...)``)."""

    cp_comm_strategy: str | None = None
    """How ranks exchange keys and values: ``"allgather"`` (default) or ``"alltoall"``
    (``ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY`` when None)."""

    def __post_init__(self) -> None:
        variable = env.ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY
        if self.cp_comm_strategy is None:
            try:
                self.cp_comm_strategy = env.read_env(variable, "allgather")
            except ValueError as error:
                names = (str(variable), *variable.fallbacks)
                raw = next(os.environ[n] for n in names if os.environ.get(n, "").strip())
                raise ValueError(f"Invalid cp_comm_strategy: {raw.strip()} ({error})") from None
        if self.cp_comm_strategy not in variable.choices:
            raise ValueError(
                f"Invalid cp_comm_strategy: {self.cp_comm_strategy} "
                f"(TorchContextParallelConfig.cp_comm_strategy must be one of "
                f"{list(variable.choices)}). Use 'allgather' or 'alltoall'."
            )


@dataclass
class DeepSpeedSequenceParallelConfig:
    """Options of DeepSpeed sequence parallelism (``ParallelismConfig(sp_handler=...)``)."""

    sp_seq_length: int | None = None
    """Sequence length of every batch, when it is fixed
    (``ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH``)."""
    sp_seq_length_is_variable: bool | None = None
    """Whether the sequence length may change between batches (default True; when False,
    ``sp_seq_length`` is required)."""
    sp_attn_implementation: str | None = None
    """``"sdpa"``, ``"flash_attention_2"``, ``"flash_attention_3"`` or a hub kernel name
    containing ``flash-attn`` (``"kernels-community/flash-attn2"``); None: the model's."""

    def __post_init__(self) -> None:
        if self.sp_seq_length_is_variable is None:
            self.sp_seq_length_is_variable = env.read_env(
                env.ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE, True
            )
        if self.sp_seq_length is None:
            self.sp_seq_length = env.read_env(env.ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH)
        if not self.sp_seq_length_is_variable and self.sp_seq_length is None:
            raise ValueError(
                "DeepSpeedSequenceParallelConfig.sp_seq_length_is_variable=False needs the fixed "
                "length; got sp_seq_length=None. Pass sp_seq_length (or set "
                "ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH), or leave the length variable."
            )
        if self.sp_attn_implementation is None:
            self.sp_attn_implementation = env.read_env(
                env.ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION
            )
        attn = self.sp_attn_implementation
        if (
            attn is not None
            and attn not in _SP_ATTN_BUILTIN
            and not ("/" in attn and "flash-attn" in attn)
        ):
            raise ValueError(
                f"Invalid sp_attn_implementation: {attn} "
                "(DeepSpeedSequenceParallelConfig.sp_attn_implementation must be one of "
                f"{list(_SP_ATTN_BUILTIN)} or a hub flash-attention kernel such as "
                "'kernels-community/flash-attn2'). Use 'sdpa' or a flash-attention kernel "
                "('eager' and 'flex_attention' cannot split sequences)."
            )


@dataclass
class TorchTensorParallelPlugin(KwargsHandler):
    """Tensor parallelism with ``torch.distributed.tensor.parallel``.

    The model's linear layers are split over ``tp_size`` processes following ``tp_plan``
    (``parallelize_module``), or the model's own ``_tp_plan`` (as ``transformers`` models
    define it) when no plan is given.
    """

    tp_size: int = 1
    """Number of processes each tensor-parallel layer is split over."""
    torch_device_mesh: DeviceMesh | None = None
    """A mesh of your own. Refused when given: accel builds the mesh from the sizes of
    ``ParallelismConfig`` (read the built one at ``AcceleratorState().device_mesh``)."""
    tp_plan: dict[str, Any] | None = field(default=None, kw_only=True)
    """Module name (``fnmatch`` pattern) -> ``"colwise"``, ``"rowwise"``, ``"sequence"`` or a
    torch ``ParallelStyle``."""

    def __post_init__(self) -> None:
        self.tp_size = _size(self.tp_size, "tp_size")
        if self.torch_device_mesh is not None:
            raise ValueError(
                "TorchTensorParallelPlugin.torch_device_mesh takes no mesh here: accel builds "
                "the device mesh from ParallelismConfig's sizes; got "
                f"{type(self.torch_device_mesh).__name__}. Drop torch_device_mesh and set "
                "tp_size (or ParallelismConfig(tp_size=...))."
            )


@dataclass
class ParallelismConfig:
    """How the processes are split between the kinds of parallelism.

    The product of the five sizes must equal the number of processes. ``dp_replicate_size`` x
    ``dp_shard_size`` > 1 with both above 1 is hybrid sharding (HSDP): each group of
    ``dp_shard_size`` processes shards the model, and the groups replicate it. Fields left at
    ``None`` take ``ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE`` (and the ``_DP_SHARD_SIZE``,
    ``_TP_SIZE``, ``_CP_SIZE``, ``_SP_SIZE`` variables; or the reference's
    ``PARALLELISM_CONFIG_*``), else 1.
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
    """Number of processes a sequence is split over with torch context parallelism (ring
    attention inside ``Accelerator.maybe_context_parallel``; the model is sharded over
    ``dp_shard`` x ``cp`` with FSDP2)."""
    cp_backend: str | None = None
    """Implementation of context parallelism: ``"torch"``
    (``ACCEL_PARALLELISM_CONFIG_CP_BACKEND``)."""
    sp_size: int | None = None
    """Number of processes a sequence is split over with DeepSpeed Ulysses sequence parallelism
    (needs the DeepSpeed engine; the other processes are data-parallel replicas)."""
    sp_backend: str | None = None
    """Implementation of sequence parallelism: ``"deepspeed"``
    (``ACCEL_PARALLELISM_CONFIG_SP_BACKEND``)."""
    tp_handler: TorchTensorParallelPlugin | TorchTensorParallelConfig | None = None
    """Tensor-parallel plan: a ``TorchTensorParallelPlugin`` (default: one of ``tp_size``) or
    the reference's ``TorchTensorParallelConfig`` (the model's own ``_tp_plan`` applies)."""
    cp_handler: TorchContextParallelConfig | None = None
    """Context-parallel options (default when ``cp_size`` > 1: ``TorchContextParallelConfig()``)."""
    sp_handler: DeepSpeedSequenceParallelConfig | None = None
    """Sequence-parallel options (default when ``sp_size`` > 1:
    ``DeepSpeedSequenceParallelConfig()``)."""

    def __post_init__(self) -> None:
        self.dp_replicate_size = _size(self.dp_replicate_size, "dp_replicate_size")
        self._auto_shard = self.dp_shard_size is None and not env.is_set(
            env.ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE
        )
        self.dp_shard_size = _size(self.dp_shard_size, "dp_shard_size")
        self.tp_size = _size(self.tp_size, "tp_size")
        self.cp_size = _size(self.cp_size, "cp_size")
        self.sp_size = _size(self.sp_size, "sp_size")
        self.cp_backend = _backend(
            self.cp_backend, env.ACCEL_PARALLELISM_CONFIG_CP_BACKEND, "cp_backend"
        )
        self.sp_backend = _backend(
            self.sp_backend, env.ACCEL_PARALLELISM_CONFIG_SP_BACKEND, "sp_backend"
        )
        self._check_sequence_split()
        if isinstance(self.tp_handler, TorchTensorParallelConfig):
            self.tp_handler = TorchTensorParallelPlugin(tp_size=self.tp_size)
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

    def _check_sequence_split(self) -> None:
        for name, handler, kind in (
            ("cp_handler", self.cp_handler, TorchContextParallelConfig),
            ("sp_handler", self.sp_handler, DeepSpeedSequenceParallelConfig),
        ):
            if handler is not None and not isinstance(handler, kind):
                raise ValueError(
                    f"ParallelismConfig.{name} must be a {kind.__name__}; got "
                    f"{type(handler).__name__}. Pass {kind.__name__}(...) or None."
                )
        if self.cp_size > 1 and self.sp_size > 1:  # type: ignore[operator]
            raise ValueError(
                "ParallelismConfig splits sequences with context parallelism or sequence "
                f"parallelism, not both; got cp_size={self.cp_size} and sp_size={self.sp_size}. "
                "Set one of them to 1."
            )
        if self.cp_size > 1 and self.cp_handler is None:  # type: ignore[operator]
            self.cp_handler = TorchContextParallelConfig()
        if self.sp_size > 1 and self.sp_handler is None:  # type: ignore[operator]
            self.sp_handler = DeepSpeedSequenceParallelConfig()

    def check_engine(self, deepspeed: bool) -> None:
        """Check that the engine of the run can split sequences the way this layout asks.

        Args:
            deepspeed: Whether the run trains with the DeepSpeed engine.

        Raises:
            ValueError: ``sp_size`` above 1 without DeepSpeed (Ulysses runs inside DeepSpeed),
                or ``cp_size`` / ``tp_size`` above 1 with DeepSpeed (they run on the torch
                device mesh, with FSDP2).
        """
        if self.sp_size > 1 and not deepspeed:  # type: ignore[operator]
            raise ValueError(
                f"ParallelismConfig.sp_size={self.sp_size} with sp_backend="
                f"{self.sp_backend!r} splits sequences with DeepSpeed Ulysses, which runs inside "
                "the DeepSpeed engine; got no DeepSpeed plugin. Pass "
                "Accelerator(deepspeed_plugin=DeepSpeedPlugin(...)) (or launch with "
                "--use_deepspeed), or use cp_size for context parallelism with FSDP2."
            )
        if deepspeed:
            for name in ("cp_size", "tp_size", "dp_shard_size", "dp_replicate_size"):
                size = getattr(self, name)
                auto = name == "dp_shard_size" and self._auto_shard
                if size > 1 and not auto:
                    raise ValueError(
                        f"ParallelismConfig.{name}={size} lays processes out on the torch device "
                        "mesh (FSDP2), which the DeepSpeed engine does not use; got it together "
                        "with a DeepSpeed plugin. With DeepSpeed set only sp_size (the other "
                        "processes are data-parallel), or drop the DeepSpeed plugin."
                    )

    def to_env(self) -> dict[str, str]:
        """The ``ACCEL_PARALLELISM_CONFIG_*`` variables that rebuild this configuration
        (``ParallelismConfig()`` reads them back)."""
        values: dict[str, Any] = {
            variable: getattr(self, name) for name, variable in _SIZE_VARIABLES.items()
        }
        values[env.ACCEL_PARALLELISM_CONFIG_CP_BACKEND] = self.cp_backend
        values[env.ACCEL_PARALLELISM_CONFIG_SP_BACKEND] = self.sp_backend
        if self.cp_handler is not None:
            values[env.ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY] = self.cp_handler.cp_comm_strategy
        if self.sp_handler is not None:
            handler = self.sp_handler
            values[env.ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE] = (
                handler.sp_seq_length_is_variable
            )
            values[env.ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH] = handler.sp_seq_length
            values[env.ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION] = (
                handler.sp_attn_implementation
            )
        return {str(k): env_text(v) for k, v in values.items() if v is not None}

    @property
    def sizes(self) -> dict[str, int]:
        """Size of every mesh dimension, outermost first."""
        return {
            "dp_replicate": self.dp_replicate_size,  # type: ignore[dict-item]
            "dp_shard": self.dp_shard_size,  # type: ignore[dict-item]
            "cp": self.cp_size,  # type: ignore[dict-item]
            "sp": self.sp_size,  # type: ignore[dict-item]
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
    def sp_enabled(self) -> bool:
        """Whether sequences are split with DeepSpeed sequence parallelism."""
        return self.sp_size > 1  # type: ignore[operator]

    @property
    def cp_enabled(self) -> bool:
        """Whether sequences are split with context parallelism."""
        return self.sizes["cp"] > 1

    @property
    def mesh_dim_names(self) -> tuple[str, ...]:
        """Names of the mesh dimensions [`build_device_mesh`][accel_state.ParallelismConfig.build_device_mesh] builds: those of size > 1,
        outermost first (empty when every size is 1)."""
        return tuple(name for name, size in self.sizes.items() if size > 1)

    @property
    def dp_dim_names(self) -> tuple[str, ...]:
        """Mesh dimensions over which data is split (processes along them read different
        batches); [`build_device_mesh`][accel_state.ParallelismConfig.build_device_mesh] joins them into the ``dp`` dimension."""
        return tuple(n for n in ("dp_replicate", "dp_shard") if n in self.mesh_dim_names)

    @property
    def non_dp_dim_names(self) -> tuple[str, ...]:
        """Mesh dimensions whose processes read the same batch (``tp``, ``cp``, ``sp``)."""
        return tuple(n for n in ("tp", "cp", "sp") if self.sizes[n] > 1)

    @property
    def dp_shard_cp_dim_names(self) -> tuple[str, ...]:
        """Mesh dimensions FSDP shards the model over: ``dp_shard`` and ``cp`` (context-parallel
        processes hold shards too, and their gradients are averaged with the data-parallel
        ones); [`build_device_mesh`][accel_state.ParallelismConfig.build_device_mesh] joins them into ``dp_shard_cp``."""
        return tuple(n for n in ("dp_shard", "cp") if n in self.mesh_dim_names)

    @property
    def dp_cp_dim_names(self) -> tuple[str, ...]:
        """Mesh dimensions over which the loss (and so the gradients) is averaged;
        [`build_device_mesh`][accel_state.ParallelismConfig.build_device_mesh] joins them into ``dp_cp``."""
        return tuple(n for n in ("dp_replicate", "dp_shard", "cp") if n in self.mesh_dim_names)

    def _get_mesh(self) -> tuple[tuple[str, ...], tuple[int, ...]] | tuple[()]:
        """``(mesh_dim_names, mesh_shape)`` of the mesh [`build_device_mesh`][accel_state.ParallelismConfig.build_device_mesh] builds, or
        ``()`` when every size is 1 (no mesh)."""
        names = self.mesh_dim_names
        if not names:
            return ()
        return names, tuple(self.sizes[name] for name in names)

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
                "ParallelismConfig needs dp_replicate_size * dp_shard_size * cp_size * sp_size * "
                "tp_size "
                f"to equal the number of processes ({num_processes}); got {self.sizes} "
                f"(product {self.total_size}). Change the sizes or the process count."
            )

    def local_rank(self, dim: str, process_index: int) -> int:
        """Coordinate of process ``process_index`` along mesh dimension ``dim``.

        The mesh numbers processes row-major over `MESH_DIMS` (outermost first), as
        [`build_device_mesh`][accel_state.ParallelismConfig.build_device_mesh] lays them out, so no mesh is needed to know it.

        Args:
            dim: ``"dp_replicate"``, ``"dp_shard"``, ``"cp"``, ``"sp"`` or ``"tp"``.
            process_index: Global rank of the process.
        """
        sizes = self.sizes
        if dim not in sizes:
            raise ValueError(
                f"ParallelismConfig has mesh dimensions {list(sizes)}; got {dim!r}. Use one of "
                "them."
            )
        rank = process_index
        for name in reversed(MESH_DIMS):
            coordinate, rank = rank % sizes[name], rank // sizes[name]
            if name == dim:
                return coordinate
        raise AssertionError("unreachable")

    def build_device_mesh(
        self, device_type: str, num_processes: int | None = None
    ) -> DeviceMesh | None:
        """Build the ``DeviceMesh`` of this layout, with the joint dimensions ``dp``,
        ``dp_shard_cp`` and ``dp_cp`` flattened from it (see the ``*_dim_names`` properties).

        Args:
            device_type: ``"cpu"``, ``"cuda"`` ...
            num_processes: Checked against [`total_size`][accel_state.ParallelismConfig.total_size] (default: the world size of the
                process group; with no group yet, ``torch``'s ``init_device_mesh`` starts one
                from the launch environment and checks the size itself).

        Returns:
            The mesh, or None when every size is 1 or when DeepSpeed splits sequences
            (``sp_size`` > 1: DeepSpeed builds its own groups).
        """
        import torch.distributed as dist
        from torch.distributed.device_mesh import init_device_mesh

        if self.sp_backend == "deepspeed" and self.sp_enabled:
            return None
        if num_processes is None and dist.is_available() and dist.is_initialized():
            num_processes = dist.get_world_size()
        if num_processes is not None:
            self.validate(num_processes)
        layout = self._get_mesh()
        if not layout:
            return None
        names, shape = layout
        mesh = init_device_mesh(device_type, shape, mesh_dim_names=names)
        for joint, name in (
            (self.dp_dim_names, "dp"),
            (self.dp_shard_cp_dim_names, "dp_shard_cp"),
            (self.dp_cp_dim_names, "dp_cp"),
        ):
            if joint:
                mesh[joint]._flatten(name)
        return mesh

"""The ``ParallelismConfig`` part of the launcher-to-process contract (the
``ACCEL_PARALLELISM_CONFIG_*`` variables), re-exported by ``environment_variables``.
"""

from __future__ import annotations

from typing import Final

from ._contract import EnvironmentVariable

CP_BACKENDS: Final = ("torch",)
"""Implementations of context parallelism."""
SP_BACKENDS: Final = ("deepspeed",)
"""Implementations of sequence parallelism."""
CP_COMM_STRATEGIES: Final = ("allgather", "alltoall")
"""How context-parallel ranks exchange keys and values."""

_USER = "``accel launch`` ``--parallelism_config_*``"
_CONFIG = "``ParallelismConfig`` (fields left at None)"
_SP_CONFIG = "``DeepSpeedSequenceParallelConfig`` (fields left at None)"

ACCEL_USE_PARALLELISM_CONFIG: Final = EnvironmentVariable(
    "ACCEL_USE_PARALLELISM_CONFIG",
    "bool",
    fallbacks=("ACCELERATE_USE_PARALLELISM_CONFIG",),
    written_by="``accel launch`` ``--use_parallelism_config`` / ``--parallelism_config_*``",
    read_by="``Accelerator`` (no ``parallelism_config`` argument)",
)
"""Lay the processes out with a ``ParallelismConfig`` built from the
``ACCEL_PARALLELISM_CONFIG_*`` variables."""

ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_DP_REPLICATE_SIZE",
    "int",
    fallbacks=("PARALLELISM_CONFIG_DP_REPLICATE_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_CONFIG,
)
"""Number of replicas of the sharded model."""

ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_DP_SHARD_SIZE",
    "int",
    fallbacks=("PARALLELISM_CONFIG_DP_SHARD_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_CONFIG,
)
"""Number of processes one replica is sharded over (unset: what the other sizes leave)."""

ACCEL_PARALLELISM_CONFIG_TP_SIZE: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_TP_SIZE",
    "int",
    fallbacks=("PARALLELISM_CONFIG_TP_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_CONFIG,
)
"""Number of processes each layer is split over (tensor parallelism)."""

ACCEL_PARALLELISM_CONFIG_CP_SIZE: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_CP_SIZE",
    "int",
    fallbacks=("PARALLELISM_CONFIG_CP_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_CONFIG,
)
"""Number of processes a sequence is split over (context parallelism)."""

ACCEL_PARALLELISM_CONFIG_CP_BACKEND: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_CP_BACKEND",
    "choice",
    choices=CP_BACKENDS,
    fallbacks=("PARALLELISM_CONFIG_CP_BACKEND",),
    written_by=_USER,
    read_by=_CONFIG,
)
"""Implementation of context parallelism (``torch``)."""

ACCEL_PARALLELISM_CONFIG_SP_SIZE: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_SP_SIZE",
    "int",
    fallbacks=("PARALLELISM_CONFIG_SP_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_CONFIG,
)
"""Number of processes a sequence is split over (DeepSpeed sequence parallelism)."""

ACCEL_PARALLELISM_CONFIG_SP_BACKEND: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_SP_BACKEND",
    "choice",
    choices=SP_BACKENDS,
    fallbacks=("PARALLELISM_CONFIG_SP_BACKEND",),
    written_by=_USER,
    read_by=_CONFIG,
)
"""Implementation of sequence parallelism (``deepspeed``)."""

ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_CP_COMM_STRATEGY",
    "choice",
    choices=CP_COMM_STRATEGIES,
    fallbacks=("PARALLELISM_CONFIG_CP_COMM_STRATEGY",),
    written_by=_USER,
    read_by="``TorchContextParallelConfig`` (field left at None)",
)
"""How context-parallel ranks exchange keys and values (``allgather`` or ``alltoall``)."""

ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH",
    "int",
    fallbacks=("PARALLELISM_CONFIG_SP_SEQ_LENGTH",),
    minimum=1,
    written_by=_USER,
    read_by=_SP_CONFIG,
)
"""Fixed sequence length of sequence-parallel batches."""

ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE",
    "bool",
    fallbacks=("PARALLELISM_CONFIG_SP_SEQ_LENGTH_IS_VARIABLE",),
    written_by=_USER,
    read_by=_SP_CONFIG,
)
"""Whether the sequence length of sequence-parallel batches may change between batches."""

ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION: Final = EnvironmentVariable(
    "ACCEL_PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION",
    "text",
    fallbacks=("PARALLELISM_CONFIG_SP_ATTN_IMPLEMENTATION",),
    written_by=_USER,
    read_by=_SP_CONFIG,
)
"""Attention implementation under sequence parallelism (``sdpa``, ``flash_attention_2`` ...)."""

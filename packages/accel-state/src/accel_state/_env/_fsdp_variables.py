"""The FSDP part of the launcher-to-process contract (the ``ACCEL_FSDP_*`` variables, read by
``FullyShardedDataParallelPlugin``), re-exported by ``environment_variables``.

Each falls back to the reference library's ``FSDP_*`` name.
"""

from __future__ import annotations

from typing import Final

from ._contract import (
    BACKWARD_PREFETCH,
    FSDP_VERSIONS,
    SHARDING_STRATEGIES,
    STATE_DICT_TYPES,
    WRAP_POLICIES,
    EnvironmentVariable,
)

ACCEL_FSDP_VERSION: Final = EnvironmentVariable(
    "ACCEL_FSDP_VERSION",
    "choice",
    choices=FSDP_VERSIONS,
    fallbacks=("FSDP_VERSION",),
    written_by="``accel launch`` ``--fsdp_version``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""FSDP version: 1 (``FullyShardedDataParallel``) or 2 (``fully_shard``)."""

ACCEL_FSDP_SHARDING_STRATEGY: Final = EnvironmentVariable(
    "ACCEL_FSDP_SHARDING_STRATEGY",
    "choice",
    choices=SHARDING_STRATEGIES,
    numbered=True,
    fallbacks=("FSDP_SHARDING_STRATEGY",),
    written_by="``accel launch`` ``--fsdp_sharding_strategy``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""FSDP sharding strategy (FSDP2 maps it to ``reshard_after_forward`` and the mesh)."""

ACCEL_FSDP_RESHARD_AFTER_FORWARD: Final = EnvironmentVariable(
    "ACCEL_FSDP_RESHARD_AFTER_FORWARD",
    "bool",
    fallbacks=("FSDP_RESHARD_AFTER_FORWARD",),
    written_by="``accel launch`` ``--fsdp_reshard_after_forward``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""FSDP2: free gathered parameters after forward."""

ACCEL_FSDP_AUTO_WRAP_POLICY: Final = EnvironmentVariable(
    "ACCEL_FSDP_AUTO_WRAP_POLICY",
    "choice",
    choices=WRAP_POLICIES,
    fallbacks=("FSDP_AUTO_WRAP_POLICY",),
    written_by="``accel launch`` ``--fsdp_auto_wrap_policy``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Which submodules become their own FSDP unit."""

ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP: Final = EnvironmentVariable(
    "ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP",
    "text",
    fallbacks=("FSDP_TRANSFORMER_CLS_TO_WRAP",),
    written_by="``accel launch`` ``--fsdp_transformer_layer_cls_to_wrap``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Comma-separated class names wrapped one unit each (``TRANSFORMER_BASED_WRAP``)."""

ACCEL_FSDP_MIN_NUM_PARAMS: Final = EnvironmentVariable(
    "ACCEL_FSDP_MIN_NUM_PARAMS",
    "int",
    fallbacks=("FSDP_MIN_NUM_PARAMS",),
    minimum=1,
    written_by="``accel launch`` ``--fsdp_min_num_params``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Minimum parameters of a unit (``SIZE_BASED_WRAP``)."""

ACCEL_FSDP_BACKWARD_PREFETCH: Final = EnvironmentVariable(
    "ACCEL_FSDP_BACKWARD_PREFETCH",
    "choice",
    choices=BACKWARD_PREFETCH,
    numbered=True,
    fallbacks=("FSDP_BACKWARD_PREFETCH",),
    written_by="``accel launch`` ``--fsdp_backward_prefetch``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""FSDP1 backward prefetch mode."""

ACCEL_FSDP_STATE_DICT_TYPE: Final = EnvironmentVariable(
    "ACCEL_FSDP_STATE_DICT_TYPE",
    "choice",
    choices=STATE_DICT_TYPES,
    numbered=True,
    fallbacks=("FSDP_STATE_DICT_TYPE",),
    written_by="``accel launch`` ``--fsdp_state_dict_type``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""How FSDP checkpoints are written."""

ACCEL_FSDP_OFFLOAD_PARAMS: Final = EnvironmentVariable(
    "ACCEL_FSDP_OFFLOAD_PARAMS",
    "bool",
    fallbacks=("FSDP_OFFLOAD_PARAMS",),
    written_by="``accel launch`` ``--fsdp_offload_params``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Keep sharded parameters and gradients on the CPU."""

ACCEL_FSDP_FORWARD_PREFETCH: Final = EnvironmentVariable(
    "ACCEL_FSDP_FORWARD_PREFETCH",
    "bool",
    fallbacks=("FSDP_FORWARD_PREFETCH",),
    written_by="``accel launch`` ``--fsdp_forward_prefetch``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""FSDP1: issue the next all-gather during forward."""

ACCEL_FSDP_USE_ORIG_PARAMS: Final = EnvironmentVariable(
    "ACCEL_FSDP_USE_ORIG_PARAMS",
    "bool",
    fallbacks=("FSDP_USE_ORIG_PARAMS",),
    written_by="``accel launch`` ``--fsdp_use_orig_params``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""FSDP1: expose the original parameters to optimizers."""

ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING: Final = EnvironmentVariable(
    "ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING",
    "bool",
    fallbacks=("FSDP_CPU_RAM_EFFICIENT_LOADING",),
    written_by="``accel launch`` ``--fsdp_cpu_ram_efficient_loading``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Only process 0 holds real weights; the others receive their shards."""

ACCEL_FSDP_SYNC_MODULE_STATES: Final = EnvironmentVariable(
    "ACCEL_FSDP_SYNC_MODULE_STATES",
    "bool",
    fallbacks=("FSDP_SYNC_MODULE_STATES",),
    written_by="``accel launch`` ``--fsdp_sync_module_states``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Broadcast process 0's parameters and buffers at wrap time."""

ACCEL_FSDP_ACTIVATION_CHECKPOINTING: Final = EnvironmentVariable(
    "ACCEL_FSDP_ACTIVATION_CHECKPOINTING",
    "bool",
    fallbacks=("FSDP_ACTIVATION_CHECKPOINTING",),
    written_by="``accel launch`` ``--fsdp_activation_checkpointing``",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Recompute activations of wrapped units in backward."""

ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD: Final = EnvironmentVariable(
    "ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD",
    "bool",
    fallbacks=("FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD",),
    written_by="the user (no launcher option yet)",
    read_by="``FullyShardedDataParallelPlugin``",
)
"""Keep what checkpointed FSDP2 units save in CPU memory until the backward pass."""

ACCEL_FSDP_GLOO_ALL_TO_ALL_REDUCE_SCATTER: Final = EnvironmentVariable(
    "ACCEL_FSDP_GLOO_ALL_TO_ALL_REDUCE_SCATTER",
    "bool",
    written_by="the user",
    read_by="the FSDP2 engine of ``Accelerator.prepare``",
)
"""FSDP2 on gloo: reduce-scatter gradients with one all-to-all and a local sum, which moves half
the bytes of torch's gloo reduce-scatter (an all-reduce of the whole input). Unset: on; ``0``
keeps torch's own reduce-scatter."""

__all__ = [
    "ACCEL_FSDP_VERSION",
    "ACCEL_FSDP_SHARDING_STRATEGY",
    "ACCEL_FSDP_RESHARD_AFTER_FORWARD",
    "ACCEL_FSDP_AUTO_WRAP_POLICY",
    "ACCEL_FSDP_TRANSFORMER_LAYER_CLS_TO_WRAP",
    "ACCEL_FSDP_MIN_NUM_PARAMS",
    "ACCEL_FSDP_BACKWARD_PREFETCH",
    "ACCEL_FSDP_STATE_DICT_TYPE",
    "ACCEL_FSDP_OFFLOAD_PARAMS",
    "ACCEL_FSDP_FORWARD_PREFETCH",
    "ACCEL_FSDP_USE_ORIG_PARAMS",
    "ACCEL_FSDP_CPU_RAM_EFFICIENT_LOADING",
    "ACCEL_FSDP_SYNC_MODULE_STATES",
    "ACCEL_FSDP_ACTIVATION_CHECKPOINTING",
    "ACCEL_FSDP_ACTIVATION_CHECKPOINTING_OFFLOAD",
    "ACCEL_FSDP_GLOO_ALL_TO_ALL_REDUCE_SCATTER",
]

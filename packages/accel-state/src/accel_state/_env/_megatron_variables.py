"""The Megatron-LM part of the launcher-to-process contract (the ``ACCEL_MEGATRON_LM_*``
variables, read by ``MegatronLMPlugin``), re-exported by ``environment_variables``.

Each falls back to the reference library's ``MEGATRON_LM_*`` name.
"""

from __future__ import annotations

from typing import Final

from ._contract import EnvironmentVariable

_LAUNCH = "``accel launch`` ``--megatron_lm_{}``"
_USER = "the user (no launcher option)"
_PLUGIN = "``MegatronLMPlugin`` (fields left at None)"

ACCEL_MEGATRON_LM_TP_DEGREE: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_TP_DEGREE",
    "int",
    fallbacks=("MEGATRON_LM_TP_DEGREE",),
    minimum=1,
    written_by=_LAUNCH.format("tp_degree"),
    read_by=_PLUGIN,
)
"""Tensor-parallel degree: processes each layer is split over."""

ACCEL_MEGATRON_LM_PP_DEGREE: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_PP_DEGREE",
    "int",
    fallbacks=("MEGATRON_LM_PP_DEGREE",),
    minimum=1,
    written_by=_LAUNCH.format("pp_degree"),
    read_by=_PLUGIN,
)
"""Pipeline-parallel degree: stages the layers are split into."""

ACCEL_MEGATRON_LM_NUM_MICRO_BATCHES: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_NUM_MICRO_BATCHES",
    "int",
    fallbacks=("MEGATRON_LM_NUM_MICRO_BATCHES",),
    minimum=1,
    written_by=_LAUNCH.format("num_micro_batches"),
    read_by=_PLUGIN,
)
"""Micro-batches per step (fed through the pipeline)."""

ACCEL_MEGATRON_LM_SEQUENCE_PARALLELISM: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_SEQUENCE_PARALLELISM",
    "bool",
    fallbacks=("MEGATRON_LM_SEQUENCE_PARALLELISM",),
    written_by=_LAUNCH.format("sequence_parallelism"),
    read_by=_PLUGIN,
)
"""Shard activations along the sequence across tensor-parallel ranks."""

ACCEL_MEGATRON_LM_RECOMPUTE_ACTIVATIONS: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_RECOMPUTE_ACTIVATIONS",
    "bool",
    fallbacks=("MEGATRON_LM_RECOMPUTE_ACTIVATIONS",),
    written_by=_LAUNCH.format("recompute_activations"),
    read_by=_PLUGIN,
)
"""Selective activation recomputation."""

ACCEL_MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER",
    "bool",
    fallbacks=("MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER",),
    written_by=_LAUNCH.format("use_distributed_optimizer"),
    read_by=_PLUGIN,
)
"""Shard optimizer states over the data-parallel ranks."""

ACCEL_MEGATRON_LM_GRADIENT_CLIPPING: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_GRADIENT_CLIPPING",
    "float",
    fallbacks=("MEGATRON_LM_GRADIENT_CLIPPING",),
    minimum=0,
    written_by=_LAUNCH.format("gradient_clipping"),
    read_by=_PLUGIN,
)
"""Clip gradients to this global L2 norm (0 turns clipping off)."""

ACCEL_MEGATRON_LM_USE_CUSTOM_FSDP: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_USE_CUSTOM_FSDP",
    "bool",
    fallbacks=("MEGATRON_LM_USE_CUSTOM_FSDP",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Use Megatron's own FSDP implementation."""

ACCEL_MEGATRON_LM_NO_LOAD_OPTIM: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_NO_LOAD_OPTIM",
    "bool",
    fallbacks=("MEGATRON_LM_NO_LOAD_OPTIM",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Do not load the optimizer state from a checkpoint."""

ACCEL_MEGATRON_LM_NO_SAVE_OPTIM: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_NO_SAVE_OPTIM",
    "bool",
    fallbacks=("MEGATRON_LM_NO_SAVE_OPTIM",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Do not save the optimizer state in a checkpoint."""

ACCEL_MEGATRON_LM_EOD_MASK_LOSS: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_EOD_MASK_LOSS",
    "bool",
    fallbacks=("MEGATRON_LM_EOD_MASK_LOSS",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Mask the loss at end-of-document tokens."""

ACCEL_MEGATRON_LM_OPTIMIZER_CPU_OFFLOAD: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_OPTIMIZER_CPU_OFFLOAD",
    "bool",
    fallbacks=("MEGATRON_LM_OPTIMIZER_CPU_OFFLOAD",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Keep the optimizer states on the CPU."""

ACCEL_MEGATRON_LM_OVERLAP_CPU_OPTIMIZER_D2H_H2D: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_OVERLAP_CPU_OPTIMIZER_D2H_H2D",
    "bool",
    fallbacks=("MEGATRON_LM_OVERLAP_CPU_OPTIMIZER_D2H_H2D",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Overlap the CPU optimizer step with gradient and parameter copies."""

ACCEL_MEGATRON_LM_USE_PRECISION_AWARE_OPTIMIZER: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_USE_PRECISION_AWARE_OPTIMIZER",
    "bool",
    fallbacks=("MEGATRON_LM_USE_PRECISION_AWARE_OPTIMIZER",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Use Megatron's precision-aware optimizer."""

ACCEL_MEGATRON_LM_DECODER_LAST_PIPELINE_NUM_LAYERS: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_DECODER_LAST_PIPELINE_NUM_LAYERS",
    "int",
    fallbacks=("MEGATRON_LM_DECODER_LAST_PIPELINE_NUM_LAYERS",),
    minimum=0,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Layers of the last pipeline stage (unset: an even split)."""

ACCEL_MEGATRON_LM_RECOMPUTE_GRANULARITY: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_RECOMPUTE_GRANULARITY",
    "text",
    fallbacks=("MEGATRON_LM_RECOMPUTE_GRANULARITY",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Recomputation granularity: ``full`` or ``selective``."""

ACCEL_MEGATRON_LM_RECOMPUTE_METHOD: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_RECOMPUTE_METHOD",
    "text",
    fallbacks=("MEGATRON_LM_RECOMPUTE_METHOD",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Recomputation method: ``uniform`` or ``block``."""

ACCEL_MEGATRON_LM_RECOMPUTE_NUM_LAYERS: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_RECOMPUTE_NUM_LAYERS",
    "int",
    fallbacks=("MEGATRON_LM_RECOMPUTE_NUM_LAYERS",),
    minimum=1,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Layers recomputed per unit."""

ACCEL_MEGATRON_LM_ATTENTION_BACKEND: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_ATTENTION_BACKEND",
    "bool",
    fallbacks=("MEGATRON_LM_ATTENTION_BACKEND",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Let Megatron choose the attention backend."""

ACCEL_MEGATRON_LM_EXPERT_MODEL_PARALLEL_SIZE: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_EXPERT_MODEL_PARALLEL_SIZE",
    "int",
    fallbacks=("MEGATRON_LM_EXPERT_MODEL_PARALLEL_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Expert-parallel size (mixture of experts)."""

ACCEL_MEGATRON_LM_EXPERT_TENSOR_PARALLEL_SIZE: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_EXPERT_TENSOR_PARALLEL_SIZE",
    "int",
    fallbacks=("MEGATRON_LM_EXPERT_TENSOR_PARALLEL_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Tensor-parallel size inside the experts."""

ACCEL_MEGATRON_LM_CONTEXT_PARALLEL_SIZE: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_CONTEXT_PARALLEL_SIZE",
    "int",
    fallbacks=("MEGATRON_LM_CONTEXT_PARALLEL_SIZE",),
    minimum=1,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Context-parallel size (processes the sequence is split over)."""

ACCEL_MEGATRON_LM_ATTENTION_DROPOUT: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_ATTENTION_DROPOUT",
    "float",
    fallbacks=("MEGATRON_LM_ATTENTION_DROPOUT",),
    minimum=0,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Dropout rate of the attention probabilities."""

ACCEL_MEGATRON_LM_HIDDEN_DROPOUT: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_HIDDEN_DROPOUT",
    "float",
    fallbacks=("MEGATRON_LM_HIDDEN_DROPOUT",),
    minimum=0,
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Dropout rate of the hidden states."""

ACCEL_MEGATRON_LM_ATTENTION_SOFTMAX_IN_FP32: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_ATTENTION_SOFTMAX_IN_FP32",
    "bool",
    fallbacks=("MEGATRON_LM_ATTENTION_SOFTMAX_IN_FP32",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Compute the attention softmax in fp32."""

ACCEL_MEGATRON_LM_CALCULATE_PER_TOKEN_LOSS: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_CALCULATE_PER_TOKEN_LOSS",
    "bool",
    fallbacks=("MEGATRON_LM_CALCULATE_PER_TOKEN_LOSS",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Average the loss over tokens rather than over micro-batches."""

ACCEL_MEGATRON_LM_USE_ROTARY_POSITION_EMBEDDINGS: Final = EnvironmentVariable(
    "ACCEL_MEGATRON_LM_USE_ROTARY_POSITION_EMBEDDINGS",
    "bool",
    fallbacks=("MEGATRON_LM_USE_ROTARY_POSITION_EMBEDDINGS",),
    written_by=_USER,
    read_by=_PLUGIN,
)
"""Use rotary position embeddings."""

__all__ = [
    "ACCEL_MEGATRON_LM_TP_DEGREE",
    "ACCEL_MEGATRON_LM_PP_DEGREE",
    "ACCEL_MEGATRON_LM_NUM_MICRO_BATCHES",
    "ACCEL_MEGATRON_LM_SEQUENCE_PARALLELISM",
    "ACCEL_MEGATRON_LM_RECOMPUTE_ACTIVATIONS",
    "ACCEL_MEGATRON_LM_USE_DISTRIBUTED_OPTIMIZER",
    "ACCEL_MEGATRON_LM_GRADIENT_CLIPPING",
    "ACCEL_MEGATRON_LM_USE_CUSTOM_FSDP",
    "ACCEL_MEGATRON_LM_NO_LOAD_OPTIM",
    "ACCEL_MEGATRON_LM_NO_SAVE_OPTIM",
    "ACCEL_MEGATRON_LM_EOD_MASK_LOSS",
    "ACCEL_MEGATRON_LM_OPTIMIZER_CPU_OFFLOAD",
    "ACCEL_MEGATRON_LM_OVERLAP_CPU_OPTIMIZER_D2H_H2D",
    "ACCEL_MEGATRON_LM_USE_PRECISION_AWARE_OPTIMIZER",
    "ACCEL_MEGATRON_LM_DECODER_LAST_PIPELINE_NUM_LAYERS",
    "ACCEL_MEGATRON_LM_RECOMPUTE_GRANULARITY",
    "ACCEL_MEGATRON_LM_RECOMPUTE_METHOD",
    "ACCEL_MEGATRON_LM_RECOMPUTE_NUM_LAYERS",
    "ACCEL_MEGATRON_LM_ATTENTION_BACKEND",
    "ACCEL_MEGATRON_LM_EXPERT_MODEL_PARALLEL_SIZE",
    "ACCEL_MEGATRON_LM_EXPERT_TENSOR_PARALLEL_SIZE",
    "ACCEL_MEGATRON_LM_CONTEXT_PARALLEL_SIZE",
    "ACCEL_MEGATRON_LM_ATTENTION_DROPOUT",
    "ACCEL_MEGATRON_LM_HIDDEN_DROPOUT",
    "ACCEL_MEGATRON_LM_ATTENTION_SOFTMAX_IN_FP32",
    "ACCEL_MEGATRON_LM_CALCULATE_PER_TOKEN_LOSS",
    "ACCEL_MEGATRON_LM_USE_ROTARY_POSITION_EMBEDDINGS",
]

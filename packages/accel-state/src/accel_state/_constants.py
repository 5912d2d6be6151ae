"""Constants the reference exposes for code that branches on the distributed type or compares
versions."""

from __future__ import annotations

from ._env._contract import BACKWARD_PREFETCH, SHARDING_STRATEGIES, STATE_DICT_TYPES, WRAP_POLICIES
from ._machine._availability import _OPERATORS

CUDA_DISTRIBUTED_TYPES = ["DEEPSPEED", "MULTI_GPU", "FSDP", "MEGATRON_LM", "TP"]
"""Distributed types whose processes each drive one CUDA device."""

TORCH_DISTRIBUTED_OPERATION_TYPES = [
    *CUDA_DISTRIBUTED_TYPES,
    "MULTI_NPU",
    "MULTI_MLU",
    "MULTI_SDAA",
    "MULTI_MUSA",
    "MULTI_XPU",
    "MULTI_CPU",
    "MULTI_HPU",
    "MULTI_NEURON",
]
"""Distributed types whose collectives go through ``torch.distributed``."""

STR_OPERATION_TO_FUNC = dict(_OPERATORS)
"""Comparison operators by their text (``">="`` -> ``operator.ge``), as ``compare_versions``
takes them."""

TORCH_DYNAMO_MODES = ["default", "reduce-overhead", "max-autotune"]
"""The ``mode`` values ``torch.compile`` accepts."""

PROFILE_PATTERN_NAME = "profile_{suffix}.json"
"""The reference's file-name pattern for profiler traces (``suffix`` = the process index).
accel's ``Accelerator.profile`` writes ``trace_rank_<i>.json`` instead."""

FSDP_SHARDING_STRATEGY = list(SHARDING_STRATEGIES)
"""FSDP sharding strategy names, in the order of their legacy 1-based numbers."""

FSDP_AUTO_WRAP_POLICY = list(WRAP_POLICIES)
"""FSDP auto-wrap policy names."""

FSDP_BACKWARD_PREFETCH = list(BACKWARD_PREFETCH)
"""FSDP1 backward prefetch names, in the order of their 1-based numbers."""

FSDP_STATE_DICT_TYPE = list(STATE_DICT_TYPES)
"""FSDP1 state-dict types, in the order of their 1-based numbers."""

FSDP2_STATE_DICT_TYPE = ["SHARDED_STATE_DICT", "FULL_STATE_DICT"]
"""State-dict types FSDP2 (``fully_shard``) can save."""

FSDP_PYTORCH_VERSION = "2.1.0.a0+32f93b1"
"""Oldest torch whose ``FullyShardedDataParallel`` has every option the plugin passes."""

FSDP2_PYTORCH_VERSION = "2.6.0"
"""Oldest torch whose ``fully_shard`` is public (``torch.distributed.fsdp.fully_shard``)."""

BETA_TP_AVAILABLE_PYTORCH_VERSION = "2.3.0"
"""Oldest torch with the DTensor parallel styles tensor parallelism (``tp_size`` > 1) builds on."""

BETA_TP_AVAILABLE_TRANSFORMERS_VERSION = "4.52.0"
"""Oldest transformers whose models carry the tensor-parallel plan ``tp_size`` > 1 applies."""

BETA_CP_AVAILABLE_PYTORCH_VERSION = "2.6.0"
"""Oldest torch with ``torch.distributed.tensor.experimental.context_parallel``, which context
parallelism (``cp_size`` > 1) runs on."""

BETA_SP_AVAILABLE_DEEPSPEED_VERSION = "0.18.2"
"""Oldest DeepSpeed with the Ulysses sequence parallelism (``UlyssesSPAttentionHF``) that
``sp_size`` > 1 runs on."""

FSDP_MODEL_NAME = "pytorch_model_fsdp"
"""Stem of the files and folders an FSDP checkpoint writes per model
(``pytorch_model_fsdp_0.safetensors``, ``pytorch_model_fsdp_0/``)."""

"""Constants the reference exposes for code that branches on the distributed type or compares
versions."""

from __future__ import annotations

from ._imports import _OPERATORS

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

"""Distributed types this version cannot run, and the one message that refuses each of them.

The launcher (before starting any process) and the ``Accelerator`` (in a process started some
other way) refuse with the same words, so a user meets one rule and one fix wherever it fails.
"""

from __future__ import annotations

import importlib.util

_CPU_OR_CUDA = "Run on CPU or CUDA (distributed_type MULTI_CPU or MULTI_GPU)"
_MEGATRON_MISSING = (
    "Megatron-LM training needs the megatron-core package, which is not installed",
    'Install it with: pip install "accel-torch[megatron]" (or train with --use_fsdp, '
    "--use_deepspeed or plain DDP)",
)


def _find_module(name: str) -> object:
    """The import spec of ``name``, or None when it (or its parent package) is missing."""
    try:
        return importlib.util.find_spec(name)
    except (ImportError, ValueError):
        return None


UNSUPPORTED_DISTRIBUTED_TYPES: dict[str, tuple[str, str]] = {
    "MULTI_NPU": ("Ascend NPUs are not supported by this version of accel", _CPU_OR_CUDA),
    "MULTI_MLU": ("Cambricon MLUs are not supported by this version of accel", _CPU_OR_CUDA),
    "MULTI_HPU": ("Intel Gaudi HPUs are not supported by this version of accel", _CPU_OR_CUDA),
    "MULTI_MUSA": (
        "Moore Threads MUSA GPUs are not supported by this version of accel",
        _CPU_OR_CUDA,
    ),
    "MULTI_SDAA": ("SDAA devices are not supported by this version of accel", _CPU_OR_CUDA),
    "MULTI_NEURON": ("AWS Neuron devices are not supported by this version of accel", _CPU_OR_CUDA),
}
"""``DistributedType`` value -> (what is not supported, what to use instead)."""

_XLA_TYPES = ("TPU", "XLA")
"""Run where ``torch_xla`` is usable; refused (saying how to get it) elsewhere."""


def unsupported_distributed_type(value: str, got: str) -> str | None:
    """The message refusing distributed type ``value``, or None when this version runs it
    (Megatron-LM is refused only where megatron-core is not installed).

    Args:
        value: A ``DistributedType`` value (``"MEGATRON_LM"`` ...).
        got: How the user asked for it (``"--use_megatron_lm"``, ``"megatron_lm_plugin set"``).

    ``"TPU"`` and ``"XLA"`` are refused only where ``torch_xla`` cannot be used.

    Returns:
        The message, `"{what} is not supported ...; got {got}. {fix}; the README's support
        table lists what each version supports."`, or None.
    """
    kind = str(value).upper()
    if kind in _XLA_TYPES:
        from ._xla_runtime import torch_xla_usable, xla_missing_message

        return None if torch_xla_usable() else xla_missing_message(got)
    reason = UNSUPPORTED_DISTRIBUTED_TYPES.get(kind)
    if kind == "MEGATRON_LM" and _find_module("megatron.core") is None:
        reason = _MEGATRON_MISSING
    if reason is None:
        return None
    rule, fix = reason
    return f"{rule}; got {got}. {fix}; the README's support table lists what each version supports."


__all__ = ["UNSUPPORTED_DISTRIBUTED_TYPES", "unsupported_distributed_type"]

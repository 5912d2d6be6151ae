"""Checking the files of a DeepSpeed checkpoint folder before DeepSpeed reads them.

DeepSpeed reads its checkpoint files with ``torch.load(weights_only=False)``, so a tampered
``mp_rank_*_model_states.pt`` or ``*_optim_states.pt`` would run code while it loads. Every
``.pt`` file of the folder is therefore read first with ``torch.load(weights_only=True)``,
which accepts tensors, numbers, strings, containers and the few plain-data classes of
DeepSpeed that its checkpoints hold (found by saving real ZeRO checkpoints).
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from accel_bigmodel import safe_torch_load

from ..._core._state_files import LOAD_STATE_OPT_IN

DEEPSPEED_CHECKPOINT_CLASSES = (
    ("deepspeed.runtime.fp16.loss_scaler", "LossScaler"),
    ("deepspeed.runtime.fp16.loss_scaler", "DynamicLossScaler"),
    ("deepspeed.utils.tensor_fragment", "fragment_address"),
    ("deepspeed.runtime.zero.config", "ZeroStageEnum"),
)
"""The DeepSpeed classes its ZeRO checkpoints hold: loss scalers (their attributes are
numbers), the address of a parameter fragment (two integers) and the ZeRO stage enum."""


def deepspeed_checkpoint_classes() -> list[Any]:
    """The classes of `DEEPSPEED_CHECKPOINT_CLASSES` this DeepSpeed version defines."""
    found = []
    for module_name, name in DEEPSPEED_CHECKPOINT_CLASSES:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        cls = getattr(module, name, None)
        if cls is not None:
            found.append(cls)
    return found


def checkpoint_files(folder: str) -> list[str]:
    """The ``.pt`` files under ``folder`` (what DeepSpeed reads), sorted."""
    files: list[str] = []
    for root, _, names in os.walk(folder):
        files.extend(os.path.join(root, n) for n in names if n.endswith(".pt"))
    return sorted(files)


def validate_folder(folder: str, trust_pickles: bool = False) -> list[str]:
    """Read every ``.pt`` file of a DeepSpeed checkpoint folder without running code.

    Args:
        folder: The folder of one engine (``{checkpoint}/deepspeed_model_{i}``).
        trust_pickles: Check nothing (the user trusts the checkpoint, by name).

    Returns:
        The files checked.

    Raises:
        accel_bigmodel.UntrustedPickleError: naming the first refused file, the global it
            names and how to opt in.
    """
    if trust_pickles or not os.path.isdir(folder):
        return []
    allowed = deepspeed_checkpoint_classes()
    files = checkpoint_files(folder)
    for path in files:
        safe_torch_load(path, allowed_globals=allowed, opt_in=LOAD_STATE_OPT_IN)
    return files

"""The reference library's side and the floor of the checkpoint benchmarks.

``bench_async_save.py`` and ``bench_checksum.py`` both put accel's ``save_state`` /
``load_state`` beside the reference library's and beside the least work that writes the same
state durably: the model's weights in one safetensors file and the optimizer's state in one
``torch.save`` file, each flushed with ``fsync`` (as accel's save does), then the folder.
"""

from __future__ import annotations

import os
from typing import Any


def reference_accelerator(project_dir: str | None = None) -> Any:
    """The reference library's ``Accelerator`` on CPU (automatic naming, 2 kept, with a folder).

    Args:
        project_dir: Project folder for automatic checkpoint naming; None: the caller names
            each checkpoint folder.
    """
    from accelerate import Accelerator
    from accelerate.utils import ProjectConfiguration

    if project_dir is None:
        return Accelerator(cpu=True)
    config = ProjectConfiguration(
        project_dir=project_dir, automatic_checkpoint_naming=True, total_limit=2
    )
    return Accelerator(cpu=True, project_config=config)


def floor_save(weights: dict[str, Any], optimizer_state: dict[str, Any], folder: str) -> None:
    """Write a model's weights and an optimizer's state by hand, durably.

    Args:
        weights: The model's ``state_dict()`` (or a copy of it).
        optimizer_state: The optimizer's ``state_dict()`` (or a copy of it).
        folder: Where the two files go (created when missing).
    """
    import torch
    from safetensors.torch import save_file

    os.makedirs(folder, exist_ok=True)
    model_file = os.path.join(folder, "model.safetensors")
    state = os.path.join(folder, "optimizer.pt")
    save_file({k: v.contiguous() for k, v in weights.items()}, model_file)
    torch.save(optimizer_state, state)
    for path in (model_file, state, folder):  # the files' bytes, then their names
        descriptor = os.open(path, os.O_RDONLY)
        os.fsync(descriptor)
        os.close(descriptor)


def host_copy(model: Any, optimizer: Any) -> tuple[dict[str, Any], dict[str, Any]]:
    """Copy the model's weights and the optimizer's state into fresh host memory (the least
    an asynchronous save must do before training may change them)."""
    import torch

    def copy(value: Any) -> Any:
        if torch.is_tensor(value):
            return value.detach().clone()
        if isinstance(value, dict):
            return {k: copy(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return type(value)(copy(v) for v in value)
        return value

    return copy(model.state_dict()), copy(optimizer.state_dict())

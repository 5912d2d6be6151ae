"""The work of ``Accelerator.save_model`` and ``Accelerator.save``: weights and objects written
once per job (``save_state`` / ``load_state`` are the ``Checkpointer``'s)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Union

import torch

if TYPE_CHECKING:
    from ._accelerator import Accelerator


def save_model(
    acc: Accelerator,
    model: torch.nn.Module,
    save_directory: str | os.PathLike[str],
    max_shard_size: Union[int, str] = "10GB",
    safe_serialization: bool = True,
) -> None:
    from .._training_checkpoints._model_weights import save_model_files  # first save only

    state_dict = acc.get_state_dict(model)
    save_model_files(
        state_dict,
        save_directory,
        max_shard_size=max_shard_size,
        safe_serialization=safe_serialization,
        save_on_each_node=acc.project_configuration.save_on_each_node,
    )


def save(acc: Accelerator, obj: object, f: object, safe_serialization: bool = False) -> None:
    from .._training_checkpoints._model_weights import save  # first save only

    save(
        obj,
        f,
        save_on_each_node=acc.project_configuration.save_on_each_node,
        safe_serialization=safe_serialization,
    )

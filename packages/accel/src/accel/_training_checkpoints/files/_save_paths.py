"""Which folder ``save_state`` writes and ``load_state`` reads."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from ._folders import checkpoints_in, is_complete, recover_replaced

if TYPE_CHECKING:
    from ._parts import CheckpointParts


# --------------------------------------------------------------------------- paths
def resolve_output_dir(
    checkpointer: CheckpointParts, output_dir: str | os.PathLike[str] | None
) -> str:
    """The folder ``save_state`` writes: ``output_dir`` or the next automatic name."""
    config = checkpointer.project_configuration
    if config.automatic_checkpoint_naming:
        if config.project_dir is None:
            raise ValueError(
                "automatic_checkpoint_naming needs a project folder; got project_dir=None. "
                "Pass ProjectConfiguration(project_dir=..., automatic_checkpoint_naming=True)."
            )
        folder = os.path.join(config.project_dir, "checkpoints")
        path = os.path.join(folder, f"checkpoint_{config.iteration}")
        if is_complete(path):
            raise FileExistsError(
                f"automatic checkpoint names are never reused; {path!r} already exists "
                f"(iteration {config.iteration}). Set "
                "checkpointer.project_configuration.iteration to the next free index, or load "
                "the latest checkpoint first (load_state() moves the iteration past it)."
            )
        return path
    if output_dir is None:
        raise ValueError(
            "save_state needs a folder; got output_dir=None without automatic checkpoint "
            "naming. Pass save_state(output_dir=...) or ProjectConfiguration("
            "automatic_checkpoint_naming=True, project_dir=...)."
        )
    return os.path.abspath(os.fspath(output_dir))


LATEST = "latest"
"""``load_state("latest")``: the newest complete checkpoint, or a fresh start when none."""


def latest_checkpoint(checkpointer: CheckpointParts) -> str | None:
    """The newest complete ``checkpoints/checkpoint_<i>`` of the project, or None.

    Raises:
        ValueError: the project has no ``project_dir`` to look in.
        FileExistsError: a folder named ``latest`` exists here, which the keyword would hide.
    """
    if os.path.lexists(LATEST):
        raise FileExistsError(
            f'load_state("latest") loads the newest checkpoint of the project, but a folder '
            f"named 'latest' exists in {os.getcwd()!r} and may be what you meant. Pass "
            "'./latest' to load that folder, or rename it."
        )
    config = checkpointer.project_configuration
    if config.project_dir is None:
        raise ValueError(
            'load_state("latest") looks in <project_dir>/checkpoints; got project_dir=None. '
            "Pass ProjectConfiguration(project_dir=..., automatic_checkpoint_naming=True)."
        )
    folder = os.path.join(config.project_dir, "checkpoints")
    found = checkpoints_in(folder, reference=True)
    return found[-1][1] if found else None


def resolve_input_dir(
    checkpointer: CheckpointParts, input_dir: str | os.PathLike[str] | None
) -> str:
    """The folder ``load_state`` reads: ``input_dir`` or the latest complete checkpoint."""
    if input_dir is not None:
        path = os.path.abspath(os.fspath(input_dir))
        if checkpointer.is_writer:
            recover_replaced(path)
        return path
    config = checkpointer.project_configuration
    if not config.automatic_checkpoint_naming or config.project_dir is None:
        raise ValueError(
            "load_state needs a folder; got input_dir=None without automatic checkpoint "
            "naming. Pass load_state(input_dir=...) or ProjectConfiguration("
            "automatic_checkpoint_naming=True, project_dir=...)."
        )
    folder = os.path.join(config.project_dir, "checkpoints")
    found = checkpoints_in(folder, reference=True)
    if not found:
        raise FileNotFoundError(
            f"load_state() without a folder loads the latest complete checkpoint_<i> in "
            f"{folder!r}; there is none. Save one with save_state() first, or call "
            'load_state("latest"), which starts fresh when there is none.'
        )
    return found[-1][1]

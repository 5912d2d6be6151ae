"""The fuzz targets: one per reader of outside bytes, each with its seeds from real saves."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Context:
    """What a target built once per process: its seed inputs and whatever its reader needs."""

    seeds: list[bytes]
    """Valid inputs written from real saves; each must read without error."""
    fmt: str | dict[int, str]
    """Format of an input (a key of ``mutate.MUTATORS``), or per file of a multi-file input."""
    state: Any = None
    """The target's own objects (a seed folder, a prepared ``Accelerator`` ...)."""


@dataclass
class Target:
    """One reader under test."""

    name: str
    reads: str
    """What is read and by which function (for the results page)."""
    prepare: Callable[[Path], Context]
    """Writes the seeds under the folder given (real saves) and builds the context."""
    run: Callable[[Context, bytes, Path], None]
    """Feeds one input to the reader, in a fresh scratch folder."""
    allowed: tuple[type[BaseException], ...] = field(default=())
    """Exceptions besides accel's own that count as a named error for this reader."""


TARGETS: dict[str, Target] = {}

KNOWN: dict[str, str] = {}
"""Findings raised at these places are reported as known and do not fail a run."""


def known(where: str) -> str | None:
    """Why a finding raised at ``where`` is known, or ``None``."""
    return next((why for place, why in KNOWN.items() if where.startswith(place)), None)


def register(
    name: str,
    reads: str,
    prepare: Callable[[Path], Context],
    run: Callable[[Context, bytes, Path], None],
    allowed: tuple[type[BaseException], ...] = (),
) -> None:
    """Add a target to the registry."""
    TARGETS[name] = Target(name, reads, prepare, run, allowed)


def load_all() -> dict[str, Target]:
    """Import every ``targets_*`` module (each registers its targets) and return the registry."""
    from . import targets_checkpoint, targets_config, targets_weights  # noqa: F401

    return TARGETS

"""Process control as plain functions, for code that holds no state object."""

from __future__ import annotations

from ._state import PartialState


def wait_for_everyone() -> None:
    """Block until every process reaches this point (nothing happens on one process).

    Creates the process state if it does not exist yet, like ``PartialState()``.
    """
    PartialState().wait_for_everyone()

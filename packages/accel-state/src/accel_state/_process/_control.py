"""Process control as plain functions, for code that holds no state object."""

from __future__ import annotations

from ._partial_state import PartialState


def wait_for_everyone() -> None:
    """Block until every process reaches this point (nothing happens on one process).

    Creates the process state if it does not exist yet, like ``PartialState()``.
    """
    PartialState().wait_for_everyone()


def is_initialized() -> bool:
    """Whether the accelerator state exists (an ``Accelerator`` or ``AcceleratorState`` was
    created in this process and not reset)."""
    from ._accelerator_state import AcceleratorState

    return bool(AcceleratorState._shared_state)


def do_nothing(*args: object, **kwargs: object) -> None:
    """Accept any arguments and do nothing (a placeholder callback)."""
    return None

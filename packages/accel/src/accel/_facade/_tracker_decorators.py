"""``on_main_process`` for tracker methods: decided per call from the tracker's own setting."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

__all__ = ["on_main_process"]


def on_main_process(function: F) -> F:
    """Decorate a tracker method so that it runs on the main process only when the tracker's
    ``main_process_only`` attribute is true (checked at each call, not at decoration).

    The process state is looked up only when the method is called, so decorating a class, or
    calling the method of a tracker with ``main_process_only = False``, never initialises it.
    On the other processes the call does nothing and returns None.

    Args:
        function: A method whose first argument is the tracker.

    Returns:
        The wrapped method.
    """

    @functools.wraps(function)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        if not getattr(self, "main_process_only", False):
            return function(self, *args, **kwargs)
        from accel_state import PartialState

        if PartialState().is_main_process:
            return function(self, *args, **kwargs)
        return None

    return run  # type: ignore[return-value]

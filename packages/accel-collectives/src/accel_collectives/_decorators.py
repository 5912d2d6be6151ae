"""Decorators that add accel's debug-mode checks to a user's own collective functions."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from ._checks import DistributedOperationException
from ._checks import verify_operation as _verify_inputs
from ._nested import find_device
from ._ops import _get_state

F = TypeVar("F", bound=Callable[..., Any])


def _operation_name(function: Callable[..., Any]) -> str:
    return f"{function.__module__}.{getattr(function, '__qualname__', function.__name__)}"


def verify_operation(function: F) -> F:
    """Decorate a collective so that, in debug mode, every process first checks its input.

    The input is the ``tensor`` keyword argument, else the first positional one (a tensor or a
    nested structure of tensors). With several processes and debug mode on
    (``ACCEL_DEBUG_MODE=1`` or ``PartialState().debug``), each process checks that its tensors
    are on the process's device type, then all processes compare structures, shapes and dtypes;
    on a mismatch every process raises [`DistributedOperationException`][accel_collectives.DistributedOperationException] naming the
    function and what each process passed, instead of hanging in the collective. Outside debug
    mode, or on one process, the function runs unchanged.

    Args:
        function: The collective to wrap; every process must call it.

    Example:
        >>> @verify_operation
        ... def all_sum(tensor):
        ...     return reduce(tensor, "sum")
    """

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        state = _get_state()
        if state.num_processes < 2 or not state.debug:
            return function(*args, **kwargs)
        operation = _operation_name(function)
        if "tensor" in kwargs:
            data = kwargs["tensor"]
        elif args:
            data = args[0]
        else:
            raise TypeError(
                f"{operation} is decorated with verify_operation, which checks the first "
                "positional argument or the 'tensor' keyword argument; the call passed neither. "
                "Pass the tensor first or as tensor=..."
            )
        device = find_device(data)
        if device is not None and device.type != state.device.type:
            raise DistributedOperationException(
                f"{operation}: the tensors of a collective must be on this process's device "
                f"type {state.device.type!r}; got a tensor on {device.type!r}. Move it first: "
                f"send_to_device(data, {str(state.device)!r})."
            )
        _verify_inputs(
            operation,
            data,
            rule="every process must pass the same structure, shapes and dtypes",
            fix="Make the inputs agree before the call (pad_across_processes pads the sizes).",
        )
        return function(*args, **kwargs)

    return wrapper  # type: ignore[return-value]


def chained_operation(function: F) -> F:
    """Decorate a function that calls collectives so that a
    [`DistributedOperationException`][accel_collectives.DistributedOperationException] raised inside it names this function too.

    The new exception's message names ``function``; the original stays attached as its cause
    (``raise ... from``), so the shapes each process passed are still in the traceback.

    Args:
        function: The function to wrap.
    """

    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except DistributedOperationException as err:
            raise DistributedOperationException(
                f"{_operation_name(function)} failed in a collective operation: {err}"
            ) from err

    return wrapper  # type: ignore[return-value]

"""One reading of a ``max_memory`` entry, shared by every function that takes budgets.

The reference library converts size strings and passes every other value on untouched, and
its clients rely on it: transformers measures free memory, multiplies it by 0.9 and hands the
float back; quantizers scale budgets the same way; numpy and torch scalars arrive from user
code. `budget_value` is what ``get_max_memory`` keeps for an entry (the same value the
reference returns, as a Python number); `planned_bytes` is the whole number of bytes
the placement compares sizes against, which gives the same decisions as the reference's
comparisons with the unrounded number (sizes are whole bytes).
"""

from __future__ import annotations

import math
import operator
from typing import Any, Union

from ._size_text import convert_file_size_to_int

UNLIMITED = 2**63 - 1
"""The planning budget of a device without a limit (``None``, ``inf``, or ``"disk"`` when the
placement adds it)."""

Budget = Union[int, float, None]
"""A budget as ``get_max_memory`` returns it: bytes (``int`` or ``float``), or ``None`` for a
device without a limit."""


def budget_value(value: Any) -> Budget:
    """Reads one ``max_memory`` entry.

    Args:
        value: A size string (``"10GiB"``), any number (``int``, ``float``, ``bool``, numpy and
            torch scalars), or ``None`` (no limit).

    Returns:
        The string's bytes as an ``int``; an integral number as an ``int``; another number as
        a ``float``; ``None`` as ``None``. Negative numbers are kept: such a device holds
        nothing.

    Raises:
        ValueError: On a string that is not a size, NaN, or a value that is not a number.
    """
    if value is None:
        return None
    if isinstance(value, str):
        return convert_file_size_to_int(value)
    try:
        return operator.index(value)
    except TypeError:
        pass
    try:
        number = float(value)
    except (TypeError, ValueError, RuntimeError, OverflowError):
        raise ValueError(
            f"A size must be a number of bytes or a string with a unit like '5GB' or '10GiB'; "
            f"got {type(value).__name__} {value!r}."
        ) from None
    if math.isnan(number):
        raise ValueError(
            f"A size must be a number of bytes, and NaN compares with no size; got "
            f"{type(value).__name__} {value!r}. Pass a number of bytes or a string like '5GB'."
        )
    return number


def planned_bytes(value: Budget) -> int:
    """The whole number of bytes a placement may put under ``value`` (``None`` and ``inf``
    are `UNLIMITED`; a fraction of a byte holds nothing, so it is rounded down)."""
    if value is None:
        return UNLIMITED
    if isinstance(value, int):
        return value
    if math.isinf(value):
        return UNLIMITED if value > 0 else -UNLIMITED
    return math.floor(value)

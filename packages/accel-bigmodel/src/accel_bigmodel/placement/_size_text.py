"""Sizes written as text (``"5GB"``, ``"10GiB"``) read as bytes, with no torch import: the
command line checks a size before it imports anything heavy."""

from __future__ import annotations

import math
from typing import Union

_SIZE_UNITS: tuple[tuple[str, int], ...] = (
    ("TIB", 2**40),
    ("GIB", 2**30),
    ("MIB", 2**20),
    ("KIB", 2**10),
    ("TB", 10**12),
    ("GB", 10**9),
    ("MB", 10**6),
    ("KB", 10**3),
    ("B", 1),
)


def convert_file_size_to_int(size: Union[int, str]) -> int:
    """Converts a size given as an integer or a string with a unit into a number of bytes.

    Units are case-insensitive: ``KiB``/``MiB``/``GiB``/``TiB`` are powers of 1024, ``KB``/``MB``/
    ``GB``/``TB`` powers of 1000. A lowercase trailing ``b`` (``"8Mb"``) means bits.

    Args:
        size: The size to convert; an ``int`` is returned unchanged.

    Returns:
        The size in bytes.

    Raises:
        ValueError: If ``size`` is negative or not a number followed by a known unit.

    Example:
        >>> convert_file_size_to_int("1MiB")
        1048576
    """
    if isinstance(size, bool):
        raise ValueError(f"A size must be an int or a string like '5GB'; got the bool {size!r}.")
    if isinstance(size, int):
        if size < 0:
            raise ValueError(
                f"A size must be non-negative; got {size}. Pass a number of bytes >= 0 or a "
                f"string like '5GB'."
            )
        return size
    if isinstance(size, float) and size.is_integer() and size >= 0:
        return int(size)
    if not isinstance(size, str):
        raise ValueError(
            f"A size must be an int (bytes) or a string with a unit like '5GB' or '10GiB'; got "
            f"{type(size).__name__} {size!r}."
        )
    text = size.strip()
    upper = text.upper()
    for unit, factor in _SIZE_UNITS:
        if upper.endswith(unit):
            number = text[: len(text) - len(unit)].strip()
            bits = unit != "B" and not unit.endswith("IB") and text.endswith("b")
            try:
                value = float(number)
            except ValueError:
                break
            if not math.isfinite(value):
                break
            if value < 0:
                raise ValueError(
                    f"A size must be non-negative; got {size!r}. Write it like '5GB' or '10GiB'."
                )
            result = int(value * factor)
            return result // 8 if bits else result
    if text.isdecimal():
        return int(text)
    raise ValueError(
        f"A size must be digits followed by a unit (B, KB, MB, GB, TB, KiB, MiB, GiB, TiB); got "
        f"{size!r}. Write it like '5GB' or '10GiB', or pass an int number of bytes."
    )

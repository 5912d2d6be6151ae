"""Reading one value of a config file: booleans as words, numbers and lists by the field's
annotation, norms, and choices from a vocabulary, each refused with the rule, the value and
the fix."""

from __future__ import annotations

import math
from typing import Any, Union

from .._errors import ConfigError

ConfigValue = Union[bool, int, float, str, list[str], None]
"""A setting as read from a config file: a flag, a number, a text, a list of texts, or unset."""

_TRUE_WORDS = {"1", "true", "yes", "y", "on"}
_FALSE_WORDS = {"0", "false", "no", "n", "off"}


def parse_bool(value: Any, name: str) -> bool:
    """Read a boolean written as a bool, 0/1, or a word (``true``/``false``, ``yes``/``no``).

    Raises:
        ConfigError: when the value is none of these.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    text = str(value).strip().lower()
    if text in _TRUE_WORDS:
        return True
    if text in _FALSE_WORDS:
        return False
    raise ConfigError(f"{name} must be true or false; got {value!r}. Use true or false.")


def coerce(value: Any, annotation: str, name: str) -> ConfigValue:
    """Convert ``value`` to the type named first in ``annotation`` (``"int | None"`` -> int).

    Text fields take text or a number; YAML's booleans read back as ``"yes"`` / ``"no"`` (an
    unquoted ``no`` in a YAML file is the boolean false).

    Raises:
        ConfigError: when the value cannot be of that type.
    """
    if value is None:
        return None
    kind = annotation.split("|")[0].strip()
    if kind == "bool":
        return parse_bool(value, name)
    if kind == "int":
        if isinstance(value, bool) or (isinstance(value, float) and not value.is_integer()):
            raise ConfigError(f"{name} must be an integer; got {value!r}. Write e.g. 2.")
        try:
            return int(value)
        except (TypeError, ValueError, OverflowError):
            raise ConfigError(f"{name} must be an integer; got {value!r}. Write e.g. 2.") from None
    if kind.startswith("list"):
        return _text_list(value, name)
    if kind == "float":
        try:
            number = float(value)
        except (TypeError, ValueError, OverflowError):
            number = math.nan
        if isinstance(value, bool) or not math.isfinite(number):
            raise ConfigError(f"{name} must be a finite number; got {value!r}. Write e.g. 1.0.")
        return number
    if isinstance(value, bool):
        return "yes" if value else "no"
    if not isinstance(value, (str, int, float)):
        raise ConfigError(
            f"{name} must be a single value (text or a number); got {type(value).__name__} "
            f"{value!r}. Write `{name.rsplit('.', 1)[-1]}: value` on one line."
        )
    return str(value)


def _text_list(value: Any, name: str) -> list[str] | None:
    """A list of texts (numbers become text); empty items are dropped, an empty list is None."""
    if not isinstance(value, (list, tuple)) or any(
        isinstance(item, (dict, list, tuple)) or item is None for item in value
    ):
        raise ConfigError(
            f"{name} must be a list of texts; got {type(value).__name__} {value!r}. Write "
            f"`{name.rsplit('.', 1)[-1]}: [first, second]` (or one `- item` line per item)."
        )
    items = [str(item).strip() for item in value if str(item).strip()]
    return items or None


def check_norm(value: float | None, name: str) -> None:
    """A gradient clipping norm is >= 0 (0 turns clipping off).

    Raises:
        ConfigError: for a negative norm.
    """
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise ConfigError(
            f"{name} is the largest gradient norm kept: a finite number >= 0 (0 turns clipping "
            "off); "
            f"got {value}. Pass e.g. --{name.rsplit('.', 1)[-1]} 1.0, or 0 for no clipping."
        )


def _choice(value: str | None, name: str, choices: tuple[str, ...]) -> str | None:
    if value is None:
        return None
    upper = str(value).upper() if choices[0].isupper() else str(value).lower()
    if upper not in choices:
        raise ConfigError(
            f"{name} must be one of {', '.join(choices)}; got {value!r}. Pick one of these."
        )
    return upper

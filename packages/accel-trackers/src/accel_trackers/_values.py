"""Turn whatever a training script logs into plain Python values a backend accepts.

No torch or numpy import happens here: tensors and arrays are recognised by duck typing
(`.item()`, `.tolist()`, `.numel()` / `.size`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from typing import Any

__all__ = [
    "flatten",
    "is_number",
    "normalize",
    "stringify_unsupported",
    "to_python",
    "warn_once",
]

logger = logging.getLogger("accel_trackers")

_PLAIN = (bool, int, float, str)


def _element_count(value: Any) -> int | None:
    """Number of elements of a tensor or array, or None if `value` is neither."""
    numel = getattr(value, "numel", None)
    if callable(numel):
        try:
            return int(numel())
        except (TypeError, ValueError):
            return None
    size = getattr(value, "size", None)
    if isinstance(size, int) and not isinstance(size, bool):
        return size
    return None


def to_python(value: Any) -> Any:
    """Convert one tensor, array or numpy scalar into a Python value.

    A one-element tensor/array (or a numpy scalar) becomes a Python number through
    `.item()`; a larger one becomes a (nested) list through `.tolist()`. Plain Python
    values, None and anything unknown are returned unchanged.

    Args:
        value: The value to convert.

    Returns:
        The converted value.
    """
    if value is None or isinstance(value, _PLAIN):
        return value
    count = _element_count(value)
    item = getattr(value, "item", None)
    if callable(item) and (count is None or count == 1):
        try:
            return item()
        except (TypeError, ValueError, RuntimeError):
            pass
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return tolist()
        except (TypeError, ValueError, RuntimeError):
            pass
    return value


def _convert_nested(value: Any) -> Any:
    value = to_python(value)
    if isinstance(value, Mapping):
        return {str(k): _convert_nested(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_convert_nested(v) for v in value]
    return value


def flatten(values: Mapping[str, Any], sep: str = "/", prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings into one level, joining keys with `sep`.

    Args:
        values: A mapping whose values may themselves be mappings.
        sep: The separator placed between a parent key and a child key.
        prefix: A key prefix for every entry (used by the recursion).

    Returns:
        A new flat dict, e.g. ``{"a": {"b": 1}}`` -> ``{"a/b": 1}``.
    """
    flat: dict[str, Any] = {}
    for key, value in values.items():
        full = f"{prefix}{sep}{key}" if prefix else str(key)
        if isinstance(value, Mapping):
            flat.update(flatten(value, sep=sep, prefix=full))
        else:
            flat[full] = value
    return flat


def normalize(values: Mapping[str, Any] | None, *, flat: bool = True) -> dict[str, Any]:
    """Convert tensors/arrays everywhere in `values` and optionally flatten it with "/".

    Args:
        values: The mapping logged or stored by the caller. None gives an empty dict.
        flat: Flatten nested mappings into "parent/child" keys.

    Returns:
        A new dict of plain Python values.

    Raises:
        TypeError: If `values` is not a mapping.
    """
    if values is None:
        return {}
    if not isinstance(values, Mapping):
        raise TypeError(
            f"Tracked values must be a mapping of name -> value; got {type(values).__name__} "
            f"({values!r:.80}). Pass a dict such as {{'loss': 0.5}}."
        )
    converted = _convert_nested(values)
    return flatten(converted) if flat else converted


def is_number(value: Any) -> bool:
    """True for int, float and bool values (bools are logged as 0/1)."""
    return isinstance(value, (int, float))


def stringify_unsupported(
    values: Mapping[str, Any],
    allowed: tuple[type, ...],
    *,
    tracker: str,
) -> dict[str, Any]:
    """Keep values of `allowed` types, turn every other value into its string form.

    A warning names every converted key so that nothing is changed silently.

    Args:
        values: A flat mapping of hyper-parameters.
        allowed: The Python types the backend stores natively.
        tracker: Name of the tracker, used in the warning.

    Returns:
        A new dict the backend can store.
    """
    out: dict[str, Any] = {}
    converted: list[str] = []
    for key, value in values.items():
        if isinstance(value, allowed):
            out[key] = value
        else:
            out[key] = str(value)
            converted.append(key)
    if converted:
        logger.warning(
            "%s cannot store hyper-parameters of these types natively; stored as text: %s",
            tracker,
            ", ".join(f"{k} ({type(values[k]).__name__})" for k in converted),
        )
    return out


def warn_once(seen: set[str], tracker: str, keys: Iterable[str], reason: str) -> None:
    """Warn once per key that values under `keys` were not sent to `tracker`.

    Args:
        seen: The set of keys already warned about (owned by the tracker instance).
        tracker: Name of the tracker.
        keys: The keys that were skipped now.
        reason: Why they were skipped (the rule that was broken).
    """
    fresh = [k for k in keys if k not in seen]
    if not fresh:
        return
    seen.update(fresh)
    logger.warning("%s skipped %s: %s", tracker, ", ".join(fresh), reason)

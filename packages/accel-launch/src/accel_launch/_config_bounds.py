"""Bounds on what a config file may hold, checked as it is read.

A config file holds a few dozen short settings. YAML aliases let a file of a few hundred bytes
name one list from many places, so a file can stand for billions of values ("billion laughs"),
or for a list that holds itself; any code that then prints or walks the value never ends. The
reader therefore refuses:

- a file larger than :data:`MAX_FILE_BYTES`, before parsing it;
- a value nested deeper than :data:`MAX_DEPTH` levels;
- a file that, with every alias replaced by what it names, holds more than :data:`MAX_VALUES`
  values or more than :data:`MAX_TEXT` characters of text.

The walk that measures the expansion stops as soon as a bound is passed, so the check itself
costs at most a bounded number of steps whatever the file holds.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ._errors import ConfigError

MAX_FILE_BYTES = 1 << 20
"""Largest config file read (1 MiB; ``accel config`` writes about 1 KiB)."""
MAX_VALUES = 100_000
"""Most values (each mapping, list, key and scalar, counted at each place an alias puts it)."""
MAX_TEXT = 1 << 20
"""Most characters of text (keys and strings, counted at each place an alias puts them)."""
MAX_DEPTH = 32
"""Deepest nesting of lists and mappings (a config file nests three levels)."""

_ALIASES = " once its YAML aliases (*name) are expanded"
_FIX = (
    "Write the value out plainly, without YAML aliases (*name), or regenerate the file with "
    "`accel config`."
)


def check_file_size(path: Path) -> None:
    """Refuse a config file larger than :data:`MAX_FILE_BYTES` before reading it.

    Raises:
        ConfigError: naming the file, its size, the limit and the fix.
    """
    try:
        size = path.stat().st_size
    except OSError:
        return  # reading it reports the problem
    if size > MAX_FILE_BYTES:
        raise ConfigError(
            f"config file {str(path)!r}: a config file holds at most {MAX_FILE_BYTES} bytes; "
            f"got {size}. Pass the config file written by `accel config` (about 1 KiB), not "
            "another file."
        )


def check_expansion(data: Any, path: Path) -> None:
    """Refuse data that expands past :data:`MAX_VALUES`, :data:`MAX_TEXT` or :data:`MAX_DEPTH`.

    Args:
        data: What the YAML or JSON reader returned (aliased lists and mappings are shared
            objects, and may hold themselves).
        path: The file, for the message.

    Raises:
        ConfigError: naming the file, the key whose value passes the bound (``section.key``
            inside a section), the bound and the fix.
    """
    values = text = 0
    stack: list[tuple[Any, tuple[str, ...], int]] = [(data, (), 0)]
    while stack:
        value, keys, depth = stack.pop()
        values += 1
        if depth > MAX_DEPTH:
            _refuse(
                path,
                keys,
                f"is nested deeper than {MAX_DEPTH} levels (a list or mapping that holds itself "
                "through an alias nests without end)",
            )
        if isinstance(value, dict):
            for key, item in value.items():
                values += 1
                text += len(key) if isinstance(key, str) else 1
                stack.append((item, (*keys, str(key)), depth + 1))
        elif isinstance(value, list):
            stack.extend((item, keys, depth + 1) for item in value)
        elif isinstance(value, str):
            text += len(value)
        if values > MAX_VALUES:
            _refuse(path, keys, f"expands to more than {MAX_VALUES} values{_ALIASES}")
        if text > MAX_TEXT:
            _refuse(path, keys, f"expands to more than {MAX_TEXT} characters of text{_ALIASES}")


def _refuse(path: Path, keys: tuple[str, ...], what: str) -> None:
    where = f"key {'.'.join(keys)!r}" if keys else "the file's top level"
    raise ConfigError(
        f"config file {str(path)!r}: the value of {where} {what}; a config file may hold at "
        f"most {MAX_VALUES} values and {MAX_TEXT} characters, nested at most {MAX_DEPTH} "
        f"levels, counting what each alias names at each place it is used. {_FIX}"
    )


def nested_too_deep(path: Path) -> ConfigError:
    """The error for a file whose nesting is too deep for the YAML or JSON reader itself."""
    return ConfigError(
        f"config file {str(path)!r} is nested deeper than the reader can follow; a config "
        f"file nests at most {MAX_DEPTH} levels. Write the settings as plain `key: value` "
        "lines, or regenerate the file with `accel config`."
    )

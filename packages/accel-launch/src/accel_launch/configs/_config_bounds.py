"""Bounds on what a config file may hold, checked as it is read.

A config file holds a few dozen short settings. YAML aliases let a file of a few hundred bytes
name one list from many places, so a file can stand for billions of values ("billion laughs"),
or for a list that holds itself; any code that then prints or walks the value never ends. The
reader therefore refuses:

- a file larger than `MAX_FILE_BYTES`, before parsing it;
- a value nested deeper than `MAX_DEPTH` levels;
- a file that, with every alias replaced by what it names, holds more than `MAX_VALUES`
  values or more than `MAX_TEXT` characters of text.

The walk that measures the expansion stops as soon as a bound is passed, so the check itself
costs at most a bounded number of steps whatever the file holds.

YAML merge keys (``<<: [*a, *a]``) copy key/value pairs while the YAML reader builds the value,
before any walk of the result could run: `load_yaml` reads with a loader that counts every
value it builds and every pair a merge copies, and stops at `MAX_VALUES`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .._errors import ConfigError

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


def check_regular_file(path: Path, what: str = "config file") -> None:
    """Refuse a path that exists but is not a regular file (a FIFO, a device such as
    ``/dev/zero``, a folder): reading one could wait forever or never end.

    Raises:
        ConfigError: naming the path, what it is and the fix.
    """
    if path.exists() and not path.is_file():
        kind = "a folder" if path.is_dir() else "a FIFO, a device or a socket"
        raise ConfigError(
            f"{what} {str(path)!r} is not a regular file (it is {kind}), so it is not read. "
            f"Pass a regular {what} (written by `accel config` or an editor)."
        )


def check_file_size(path: Path) -> None:
    """Refuse a config file larger than `MAX_FILE_BYTES` before reading it.

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
    """Refuse data that expands past `MAX_VALUES`, `MAX_TEXT` or `MAX_DEPTH`.

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


class _OverBudget(Exception):
    """Raised inside the loader when a bound is passed; `load_yaml` names the file."""


class _BoundedLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that counts, while it builds, each value and each merged pair."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.budget = MAX_VALUES
        self.merging: set[int] = set()

    def _spend(self, count: int, node: yaml.Node, what: str) -> None:
        self.budget -= count
        if self.budget < 0:
            line = node.start_mark.line + 1 if node.start_mark is not None else 0
            raise _OverBudget(
                f"the {what} at line {line} expands to more than {MAX_VALUES} values once its "
                "YAML aliases (*name) and merge keys (<<) are expanded"
            )

    def construct_object(self, node: yaml.Node, deep: bool = False) -> Any:
        if node not in self.constructed_objects:
            self._spend(1, node, "value")
        try:
            return super().construct_object(node, deep=deep)
        except (IndexError, KeyError, AttributeError, TypeError, OverflowError):
            # PyYAML's builders of tagged scalars fail with these on values they cannot read
            # (`!!float` or `!!int` with nothing after it, `!!bool maybe`, `!!timestamp x`).
            if not isinstance(node, yaml.ScalarNode):
                raise
            line = node.start_mark.line + 1 if node.start_mark is not None else 0
            kind = node.tag.rsplit(":", 1)[-1]
            raise ValueError(
                f"`!!{kind}` at line {line} has the value {node.value!r}, which YAML cannot "
                f"read as a {kind}"
            ) from None

    def flatten_mapping(self, node: yaml.MappingNode) -> None:
        # Merge the merged mappings first (each one bounded by this same method), then count
        # the pairs this mapping will hold before the base loader copies them.
        if id(node) in self.merging:
            line = node.start_mark.line + 1
            raise _OverBudget(
                f"the mapping at line {line} merges itself, which expands without end"
            )
        self.merging.add(id(node))
        try:
            merged = [v for k, v in node.value if k.tag == "tag:yaml.org,2002:merge"]
            sources: list[yaml.Node] = []
            for value in merged:
                items = value.value if isinstance(value, yaml.SequenceNode) else [value]
                sources.extend(item for item in items if isinstance(item, yaml.MappingNode))
            for source in sources:
                self.flatten_mapping(source)
            if sources:
                pairs = len(node.value) + sum(len(source.value) for source in sources)
                self._spend(pairs, node, "mapping that merges keys (<<)")
        finally:
            self.merging.discard(id(node))
        super().flatten_mapping(node)


def load_yaml(text: str, path: Path) -> Any:
    """Parse YAML text as ``yaml.safe_load`` does, within `MAX_VALUES` built values.

    Raises:
        ConfigError: naming the file, the line where the bound was passed, and the fix.
        yaml.YAMLError: when the text does not parse.
    """
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except _OverBudget as err:
        raise ConfigError(
            f"config file {str(path)!r}: {err}; a config file may hold at most {MAX_VALUES} "
            "values. Write the settings out plainly, without aliases "
            "or merge keys, or regenerate the file with `accel config`."
        ) from None
    finally:
        loader.dispose()

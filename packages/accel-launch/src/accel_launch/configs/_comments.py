"""Carrying the comments of a YAML config file over to its rewritten version.

``accel config update`` rewrites a file through the config model, which knows values, not
comments. Each comment is tied to the top-level key whose block holds it (the lines above a key
and inside its section), then written above the same key of the new file. Comments before the
first key stay at the top; comments of a key the update removed are kept at the end.
"""

from __future__ import annotations

import re

_TOP_KEY = re.compile(r"^([^\s#'\"-][^:#]*?)\s*:(\s|$)")
_INLINE = re.compile(r"\s(#.*)$")
_QUOTED = re.compile(r"'[^']*'|\"[^\"]*\"")


def _comment_of(line: str) -> str | None:
    """The comment carried by ``line``, if any (a whole-line comment or a trailing ``# ...``)."""
    stripped = line.strip()
    if stripped.startswith("#"):
        return stripped
    found = _INLINE.search(_QUOTED.sub("''", line))  # a '#' inside quotes is no comment
    return found.group(1) if found else None


def _comments_by_key(text: str) -> tuple[list[str], dict[str, list[str]], list[str]]:
    """(comments before the first key, comments of each top-level key, comments after the
    last block)."""
    header: list[str] = []
    blocks: dict[str, list[str]] = {}
    pending: list[str] = []  # whole-line comments at column 0: they go with the next key
    current: list[str] | None = None
    for line in text.splitlines():
        match = _TOP_KEY.match(line)
        comment = _comment_of(line)
        if match:
            if current is None:
                header, pending = pending, []
            current = blocks.setdefault(match.group(1), [])
            current.extend(pending)
            pending = []
            if comment:
                current.append(comment)
        elif comment:
            if current is not None and line[:1] in (" ", "\t"):
                current.append(comment)  # inside the section of the current key
            else:
                pending.append(comment)
    return header, blocks, pending


def has_comments(text: str) -> bool:
    """Whether a YAML text holds a comment."""
    header, blocks, trailing = _comments_by_key(text)
    return bool(header or trailing) or any(blocks.values())


def carry_comments(old_text: str, new_text: str) -> str:
    """``new_text`` with the comments of ``old_text`` above the same top-level keys."""
    header, blocks, trailing = _comments_by_key(old_text)
    out = list(header)
    placed: set[str] = set()
    for line in new_text.splitlines():
        match = _TOP_KEY.match(line)
        if match and match.group(1) in blocks:
            out.extend(blocks[match.group(1)])
            placed.add(match.group(1))
        out.append(line)
    for key, comments in blocks.items():
        if key not in placed and comments:
            out.append(f"# comments of `{key}`, which accel config update moved or removed:")
            out.extend(comments)
    out.extend(trailing)
    return "\n".join(out) + "\n"

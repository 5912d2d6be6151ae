"""The property every reader keeps: given any bytes, a result or a named error.

A named error is one of accel's own exception classes, or an exception raised by a ``raise``
statement of accel's own code (a message written for the user). Anything else escaping a
reader (a ``KeyError`` from a dict lookup, an ``OverflowError`` from ``int(inf)``, a
``json.JSONDecodeError``, a ``MemoryError``) is a finding.
"""

from __future__ import annotations

import hashlib
import linecache
import os
import traceback
from dataclasses import dataclass

ACCEL_ROOTS = (
    "accel",
    "accel_state",
    "accel_collectives",
    "accel_data",
    "accel_bigmodel",
    "accel_pipeline",
    "accel_precision",
    "accel_trackers",
    "accel_launch",
)

_SRC_MARK = os.sep + "packages" + os.sep


class InputTimeout(Exception):
    """Raised inside a reader that ran past the wall time allowed per input."""


@dataclass(frozen=True)
class Finding:
    """What escaped a reader, and where."""

    kind: str
    """The exception's class name, or ``timeout`` / ``signal N``."""
    where: str
    """``file:line`` of the innermost frame (the raise site)."""
    message: str
    """The first line of the exception's text."""

    @property
    def signature(self) -> str:
        """A short stable name for the finding: the same defect gives the same signature."""
        digest = hashlib.sha1(f"{self.kind}@{self.where}".encode()).hexdigest()[:10]
        return f"{self.kind}-{digest}"


def _is_accel_file(filename: str) -> bool:
    return _SRC_MARK in filename and f"{os.sep}src{os.sep}" in filename


def _short(filename: str) -> str:
    if _SRC_MARK in filename:
        return filename.split(_SRC_MARK, 1)[1]
    parts = filename.split(os.sep)
    return os.sep.join(parts[-2:])


def judge(exc: BaseException, allowed: tuple[type[BaseException], ...] = ()) -> Finding | None:
    """``None`` when ``exc`` is a named error, else the finding it is."""
    frames = traceback.extract_tb(exc.__traceback__)
    last = frames[-1] if frames else None
    ours = [f for f in frames if _is_accel_file(f.filename)]
    spot = ours[-1] if ours else last  # the line of accel's code the error passed through
    where = f"{_short(spot.filename)}:{spot.lineno}" if spot else "?"
    message = (str(exc).splitlines() or [""])[0][:200]
    if isinstance(exc, InputTimeout):
        return Finding("timeout", where, message)
    if isinstance(exc, MemoryError):
        return Finding("MemoryError", where, message)
    kind = type(exc)
    if kind.__module__.split(".")[0] in ACCEL_ROOTS:
        return None
    if allowed and isinstance(exc, allowed):
        return None
    if last is not None and _is_accel_file(last.filename):
        line = linecache.getline(last.filename, last.lineno).strip()
        if line.startswith("raise ") and isinstance(
            exc, (ValueError, KeyError, TypeError, OSError, RuntimeError)
        ):
            return None
    return Finding(kind.__name__, where, message)

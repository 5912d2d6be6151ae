"""Progress bars that use tqdm when it is installed and stderr is a terminal."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from .._bigmodel_variables import ACCEL_BIGMODEL_QUIET


class _Silent:
    def update(self, n: int = 1) -> None:
        pass


def progress_enabled(show: bool | None) -> bool:
    """Whether to draw a bar: ``show`` if given, else only on a terminal and not when quieted."""
    if show is not None:
        return show
    if ACCEL_BIGMODEL_QUIET.read():
        return False
    stream = sys.stderr
    return bool(getattr(stream, "isatty", lambda: False)())


@contextmanager
def progress(
    total: int, description: str, unit: str = "B", show: bool | None = None
) -> Iterator[Any]:
    """Yields an object with ``update(n)``: a tqdm bar, or a silent stand-in."""
    if not progress_enabled(show) or total <= 0:
        yield _Silent()
        return
    try:
        from tqdm.auto import tqdm
    except ImportError:
        yield _Silent()
        return
    bar = tqdm(total=total, desc=description, unit=unit, unit_scale=True, leave=False)
    try:
        yield bar
    finally:
        bar.close()


def human_bytes(count: float) -> str:
    """``1536 -> '1.5 KiB'``."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} TiB"

"""What a command is doing while the user waits: one line, and a spinner on a terminal."""

from __future__ import annotations

import itertools
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TextIO

FRAMES = "|/-\\"
"""The spinner's frames."""


@contextmanager
def status(message: str, stream: TextIO | None = None, interval: float = 0.2) -> Iterator[None]:
    """Print ``message`` (to stderr by default) for the duration of the block.

    On a terminal a spinner turns after it and the line ends with the seconds taken; elsewhere
    (a pipe, a log file) the message is printed once, as one line.

    Args:
        message: What is being done, e.g. ``"importing transformers"``.
        stream: Where to write (default: ``sys.stderr``).
        interval: Seconds between two frames of the spinner.
    """
    out = sys.stderr if stream is None else stream
    if not out.isatty():
        print(message, file=out, flush=True)
        yield
        return
    done = threading.Event()
    start = time.perf_counter()

    def spin() -> None:
        for frame in itertools.cycle(FRAMES):
            out.write(f"\r{message} {frame}")
            out.flush()
            if done.wait(interval):
                return

    spinner = threading.Thread(target=spin, daemon=True)
    spinner.start()
    try:
        yield
    finally:
        done.set()
        spinner.join()
        out.write(f"\r{message} ({time.perf_counter() - start:.1f}s)\n")
        out.flush()


def size_text(count: float) -> str:
    """``1536 -> '1.5 KiB'``: bytes for a person to read."""
    value = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(value) < 1024:
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{value:.1f} TiB"


class ByteProgress:
    """A percentage of bytes done, redrawn on one line of a terminal; nothing elsewhere (a pipe
    or a log file gets the lines the caller prints when each step ends).

    Args:
        label: What is being done, e.g. ``"model-00001-of-00004.safetensors"``.
        total: The bytes the work handles.
        stream: Where to draw (default: ``sys.stderr``).
        interval: Least seconds between two redraws.
    """

    def __init__(
        self, label: str, total: int, stream: TextIO | None = None, interval: float = 0.25
    ) -> None:
        self.out = sys.stderr if stream is None else stream
        self.label, self.total, self.done = label, max(total, 1), 0
        self.interval, self.drawn = interval, 0.0
        self.live = bool(getattr(self.out, "isatty", lambda: False)())

    def update(self, count: int) -> None:
        """Count ``count`` more bytes done, and redraw when ``interval`` has passed."""
        self.done += count
        now = time.perf_counter()
        if self.live and (now - self.drawn >= self.interval or self.done >= self.total):
            self.drawn = now
            share = min(self.done / self.total, 1.0)
            self.out.write(
                f"\r{self.label}: {share:4.0%} of {size_text(self.total)}"
                f" [{'#' * int(share * 20):<20}]"
            )
            self.out.flush()

    def close(self) -> None:
        """Clear the line drawn (a terminal only), for the caller's own line."""
        if self.live and self.drawn:
            self.out.write("\r\033[K")
            self.out.flush()

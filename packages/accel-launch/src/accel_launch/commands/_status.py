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

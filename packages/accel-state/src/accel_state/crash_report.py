"""How a process of a multi-process run reports the exception that ends it.

When one process raises, its peers fail in their next collective with the backend's
``Connection closed by peer`` (gloo) or ``remote process exited`` (NCCL): a second traceback
per peer that says nothing about the cause. So an uncaught exception in a process of a group
of several is reported this way:

- the process that raised first prints its traceback once, each line prefixed with
  ``[rank N]``;
- a process whose exception comes from a peer that stopped prints one line saying so;
- both write the launcher's error file (``TORCHELASTIC_ERROR_FILE``, set by torchrun and so by
  ``accel launch``), with the exception's one-line summary, so that the launcher's last line
  names the process that raised first and why (`PEER_STOPPED` marks the peers).
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from types import TracebackType

PEER_STOPPED = "peer stopped: "
"""Start of the error-file message of a process whose collective failed because a peer
stopped; the launcher names another process as the cause."""

_PEER_SIGNS = (
    "Connection closed by peer",
    "Connection reset by peer",
    "remote process exited",
    "NCCL communicator was aborted",
)
"""Words of the backends' errors when the other end of a collective is gone."""


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and the exceptions it was raised from or while handling, without repeats."""
    found: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and all(current is not seen for seen in found):
        found.append(current)
        current = current.__cause__ or current.__context__
    return found


def peer_stopped(exc: BaseException) -> str | None:
    """The backend's words when ``exc`` comes from a peer that stopped, else None."""
    for link in _chain(exc):
        text = str(link)
        for sign in _PEER_SIGNS:
            if sign in text:
                return sign
    return None


def _summary(exc_type: type[BaseException], exc: BaseException) -> str:
    """``ValueError: bad batch``: the last line of a traceback, on one line."""
    text = traceback.format_exception_only(exc_type, exc)[-1].strip()
    return " ".join(text.split())


def _where(tb: TracebackType | None) -> str:
    """The frames of ``tb`` outside torch, outermost first, on one line."""
    frames = [
        frame
        for frame in traceback.extract_tb(tb)
        if f"{os.sep}torch{os.sep}" not in frame.filename
    ]
    return " > ".join(
        f"{os.path.basename(frame.filename)}:{frame.lineno} in {frame.name}" for frame in frames
    )


def _write_error_file(message: str, callstack: str) -> None:
    """Write the launcher's error file in the format torchrun reads, when there is one."""
    path = os.environ.get("TORCHELASTIC_ERROR_FILE")
    if not path:
        return
    data = {"message": message, "timestamp": int(time.time()), "py_callstack": callstack}
    try:
        with open(path, "w") as handle:
            json.dump(data, handle)
    except OSError:
        pass  # the traceback on stderr still says what happened


def report(
    rank: int, exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    """Print the report of process ``rank`` on stderr and write the launcher's error file."""
    callstack = "".join(traceback.format_exception(exc_type, exc, tb))
    summary = _summary(exc_type, exc)
    sign = peer_stopped(exc)
    if sign is not None:
        _write_error_file(PEER_STOPPED + summary, callstack)
        print(
            f"[rank {rank}] stopped: a collective failed because another process stopped "
            f"first ({sign}); that process's traceback is above, and the launcher's last line "
            f"names it. This process was at: {_where(tb)}",
            file=sys.stderr,
            flush=True,
        )
        return
    _write_error_file(summary, callstack)
    prefix = f"[rank {rank}] "
    lines = "".join(prefix + line for line in callstack.splitlines(keepends=True))
    sys.stderr.write(lines if lines.endswith("\n") else lines + "\n")
    sys.stderr.flush()

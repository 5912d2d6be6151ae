"""One writer per checkpoint folder: a lock file beside it, held from staging to commit.

Two runs (not two processes of one run) that save into the same folder at once would each
clear the other's staging folder. The writer of a save first creates ``.<name>.lock`` beside
the target with ``O_EXCL`` (an atomic test-and-create on local and network file systems),
recording its host, process id and start time; a second writer finds it and is refused with an
error naming the first. A lock whose writer was on this host and no longer runs (a killed run)
is stale: it is removed and taken over. A lock of another host cannot be checked from here, so
the error says how to remove it once that writer is known to be gone.
"""

from __future__ import annotations

import errno
import json
import os
import socket
import time


class CheckpointLockedError(FileExistsError):
    """Another run is writing the same checkpoint folder."""

    def __str__(self) -> str:
        return str(self.strerror)


def lock_path(output_dir: str) -> str:
    """The lock file of saves into ``output_dir``."""
    parent, name = os.path.split(os.path.abspath(output_dir))
    return os.path.join(parent, f".{name}.lock")


def acquire(output_dir: str) -> str:
    """Take the lock of ``output_dir`` for this process; return its path.

    Raises:
        CheckpointLockedError: a live writer holds it, named in the message.
    """
    path = lock_path(output_dir)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    record = {"host": socket.gethostname(), "pid": os.getpid(), "since": time.time()}
    for _ in range(3):
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            holder = _read(path)
            if holder is not None and not _is_stale(holder):
                raise _locked(output_dir, path, holder) from None
            _remove_stale(path, holder)
            continue
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as handle:
                json.dump(record, handle)
        except BaseException:
            os.remove(path)  # made a moment ago by this call (a full disk refuses its text)
            raise
        return path
    raise _locked(output_dir, path, _read(path) or {})


def release(output_dir: str) -> None:
    """Drop the lock of ``output_dir`` if this process holds it."""
    path = lock_path(output_dir)
    holder = _read(path)
    if holder is not None and _is_mine(holder):
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def remove_stale_locks(folder: str) -> None:
    """Remove the stale locks (see `acquire`) of ``checkpoint_<i>`` saves in ``folder``."""
    for name in os.listdir(folder):
        if name.startswith(".checkpoint_") and name.endswith(".lock"):
            path = os.path.join(folder, name)
            holder = _read(path)
            if holder is not None and _is_stale(holder):
                _remove_stale(path, holder)


def _read(path: str) -> dict[str, object] | None:
    """The record of the lock at ``path``; None when there is none (or not yet written)."""
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except FileNotFoundError:
        return None
    try:
        record = json.loads(text)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        # Being written right now by its creator, or damaged: judge it by its age.
        age = time.time() - os.path.getmtime(path) if os.path.exists(path) else 0.0
        return {"host": "?", "pid": -1, "since": time.time() - age, "unreadable": True}
    return record


def _is_mine(holder: dict[str, object]) -> bool:
    return holder.get("host") == socket.gethostname() and holder.get("pid") == os.getpid()


def _is_stale(holder: dict[str, object]) -> bool:
    """Whether the writer of ``holder`` is gone (this host only: others cannot be checked)."""
    if holder.get("unreadable"):
        since = holder.get("since")
        return isinstance(since, float) and time.time() - since > 10.0
    if holder.get("host") != socket.gethostname():
        return False
    pid = holder.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return True
    if pid == os.getpid():
        return False  # this process: a save of its own still holds it
    try:
        os.kill(pid, 0)
    except OSError as exc:
        return exc.errno == errno.ESRCH
    return False


def _remove_stale(path: str, holder: dict[str, object] | None) -> None:
    """Remove the lock at ``path`` if it still holds ``holder`` (not a newer writer's)."""
    if holder is not None and _read(path) not in (holder, None) and not holder.get("unreadable"):
        return
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


def _locked(output_dir: str, path: str, holder: dict[str, object]) -> CheckpointLockedError:
    since = holder.get("since")
    when = (
        time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(since))
        if isinstance(since, float)
        else "an unknown time"
    )
    writer = f"process {holder.get('pid')} on host {holder.get('host')!r}"
    return CheckpointLockedError(
        errno.EEXIST,
        f"save_state writes a checkpoint folder from one run at a time; {output_dir!r} is being "
        f"written by {writer} since {when} (lock file {path!r}). Nothing was written. Save to "
        "another output_dir, or wait for that save to finish; if that writer is gone (a killed "
        "run on another machine), delete the lock file and save again.",
        path,
    )

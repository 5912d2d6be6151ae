"""Paths read from a checkpoint's own files stay inside the checkpoint's folder.

A checkpoint names its other files: a DCP ``.metadata`` names the ``.distcp`` file of each
entry, an ``*.index.json`` names the shard of each tensor, an offload ``index.json`` names the
file of each weight. Whoever wrote the folder chose those names, so a name like
``../secret.pt`` or ``/etc/shadow`` would make the reader open a file outside the folder and
copy its bytes into a model or a merged checkpoint. Every such name is resolved here and
refused unless it lands inside the folder (symbolic links are followed before the check).
"""

from __future__ import annotations

import os
import reprlib

_SHOWN = reprlib.Repr()
_SHOWN.maxlevel, _SHOWN.maxother, _SHOWN.maxstring = 3, 200, 200


def shown(value: object) -> str:
    """A bounded repr of a value read from a file, for an error message.

    A tampered file can nest one list in itself many times over (whose full repr grows
    exponentially before it could be cut), or rebuild an object without the fields its repr
    reads: this stops at 200 characters and never raises.
    """
    try:
        return _SHOWN.repr(value)[:200]
    except Exception:  # a damaged object may not even print
        return f"<a {type(value).__name__} that cannot be printed>"


class PathOutsideCheckpointError(ValueError):
    """A checkpoint file names a path outside the checkpoint's folder.

    Attributes:
        path: The file that holds the entry.
        entry: The entry (tensor or key) that names the path.
        target: The path as written in the file.
    """

    def __init__(self, message: str, path: str, entry: str, target: str) -> None:
        super().__init__(message)
        self.path = path
        self.entry = entry
        self.target = target


def contained_path(folder: str, target: object, source: str, entry: str) -> str:
    """The absolute path of ``target`` (a name read from ``source``) inside ``folder``.

    Args:
        folder: The checkpoint's folder.
        target: The path as read from the file (must be a relative ``str``).
        source: The file that named it (for the error).
        entry: The entry that named it (for the error).

    Raises:
        PathOutsideCheckpointError: ``target`` is not a string, is absolute, or resolves
            (``..``, a symbolic link) outside ``folder``.
    """
    root = os.path.realpath(folder)
    if isinstance(target, str) and target and not os.path.isabs(target) and "\0" not in target:
        resolved = os.path.realpath(os.path.join(root, target))
        if os.path.commonpath([root, resolved]) == root and resolved != root:
            return os.path.join(os.path.abspath(folder), target)
    raise PathOutsideCheckpointError(
        f"a checkpoint's files may name only files inside its folder; {source} gives entry "
        f"{entry!r} the path {shown(target)}, which is not a relative path inside {root!r}. The "
        "file was edited or built to read elsewhere: use an intact copy of the checkpoint.",
        source,
        entry,
        target if isinstance(target, str) else shown(target),
    )


def check_offload_entries(folder: str, index: dict[str, object], source: str) -> None:
    """Refuse entries of an offload index read from ``source`` that read outside ``folder``.

    A relative ``safetensors_file`` must resolve inside the folder. An absolute one is the
    form accel (and the reference library) record for weights used in place from the user's
    own checkpoint, so it is kept, but only for a ``.safetensors`` file: such a file is parsed
    as raw tensors with a checked header, never unpickled.

    Raises:
        PathOutsideCheckpointError: naming the entry and its path.
    """
    for name, info in index.items():
        if not isinstance(info, dict) or "safetensors_file" not in info:
            continue
        target = info["safetensors_file"]
        if isinstance(target, str) and os.path.isabs(target):
            if target.endswith(".safetensors") and "\0" not in target:
                continue
            raise PathOutsideCheckpointError(
                f"an offload index may name a file outside its folder only as the absolute path "
                f"of a .safetensors file (a checkpoint used in place); {source} gives entry "
                f"{name!r} the path {target!r}. Use an intact offload folder, or offload the "
                "weights again.",
                source,
                str(name),
                target,
            )
        contained_path(folder, target, source, str(name))

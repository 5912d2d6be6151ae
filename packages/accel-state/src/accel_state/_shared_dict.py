"""``ThreadLocalSharedDict``: a class attribute holding one dict per thread."""

from __future__ import annotations

import threading
from typing import Any


class ThreadLocalSharedDict(threading.local):
    """A descriptor whose value is a dict shared by every instance of the owning class within
    one thread; each thread sees its own dict.

    Reading the attribute on the class or on an instance gives the same dict; assigning it on
    an instance replaces that thread's dict. Assigning on the class replaces the descriptor
    itself, so clear the dict in place (``Owner._shared.clear()``) instead.

    Args:
        thread_local: Kept for the signature of the reference library; every instance is
            thread-local (it is a ``threading.local``).
    """

    def __init__(self, thread_local: bool = False) -> None:
        self._storage: dict[str, Any] = {}

    def __get__(self, obj: Any, objtype: type | None = None) -> dict[str, Any]:
        return self._storage

    def __set__(self, obj: Any, value: dict[str, Any]) -> None:
        self._storage = value

"""Logging that knows about processes: log once on the main process, or on every process in
rank order."""

from __future__ import annotations

import functools
import logging
from collections.abc import MutableMapping
from typing import Any

from . import environment_variables as env
from ._process._partial_state import PartialState


class MultiProcessAdapter(logging.LoggerAdapter):
    """A logger adapter whose calls take ``main_process_only`` and ``in_order``.

    Every logging call (``debug``, ``info``, ``warning``, ``error``, ``critical``, ``log``,
    ``exception``) accepts two extra keyword arguments:

    - ``main_process_only`` (default True): log on the main process only.
    - ``in_order`` (default False): with ``main_process_only=False``, log on every process one
      after the other, in rank order (every process must make the call: it synchronises).

    The process state must exist (``PartialState()`` or ``Accelerator()``) before a call.
    """

    @staticmethod
    def _should_log(main_process_only: bool) -> bool:
        state = PartialState()
        return not main_process_only or state.is_main_process

    def log(self, level: int, msg: object, *args: Any, **kwargs: Any) -> None:
        """Log ``msg`` at ``level`` on the processes chosen by ``main_process_only``/``in_order``.

        Raises:
            RuntimeError: if the process state was not created yet.
        """
        if not PartialState._shared_state:
            raise RuntimeError(
                "get_logger(...) loggers need the process state, which does not exist yet; "
                f"got a logging call for {self.logger.name!r} before it. Create it first with "
                "PartialState() or Accelerator()."
            )
        main_process_only = kwargs.pop("main_process_only", True)
        in_order = kwargs.pop("in_order", False)
        kwargs.setdefault("stacklevel", 2)
        if not self.isEnabledFor(level):
            return
        if in_order and not main_process_only:
            state = PartialState()
            for rank in range(state.num_processes):
                if rank == state.process_index:
                    msg, kwargs = self.process(msg, kwargs)
                    self.logger.log(level, msg, *args, **kwargs)
                state.wait_for_everyone()
        elif self._should_log(main_process_only):
            msg, kwargs = self.process(msg, kwargs)
            self.logger.log(level, msg, *args, **kwargs)

    @functools.lru_cache(None)  # noqa: B019 - one warning per distinct message, as intended
    def warning_once(self, *args: Any, **kwargs: Any) -> None:
        """Log a warning the first time these exact arguments are seen (then never again)."""
        self.warning(*args, **kwargs)

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, Any]:
        """Pass the message through unchanged (the adapter adds no context)."""
        return msg, kwargs


def get_logger(name: str, log_level: str | None = None) -> MultiProcessAdapter:
    """Return a logger for ``name`` whose calls accept ``main_process_only`` and ``in_order``.

    Args:
        name: The logger's name, usually ``__name__``.
        log_level: A level name such as ``"INFO"`` set on this logger and the root logger;
            None reads ``ACCEL_LOG_LEVEL`` (or ``ACCELERATE_LOG_LEVEL``), and leaves the levels
            alone when neither is set.

    Raises:
        ValueError: if the level is not one of logging's level names.

    Example:
        >>> logger = get_logger(__name__, log_level="INFO")
        >>> logger.info("only the main process prints this")
        >>> logger.info("every process, rank by rank", main_process_only=False, in_order=True)
    """
    if log_level is None:
        log_level = env.read_env(env.ACCEL_LOG_LEVEL)
    logger = logging.getLogger(name)
    if log_level is not None:
        level = log_level.upper()
        if not isinstance(logging.getLevelName(level), int):
            raise ValueError(
                f"get_logger: log_level must be a logging level name "
                f"(DEBUG, INFO, WARNING, ERROR, CRITICAL); got {log_level!r}. "
                'Pass e.g. log_level="INFO".'
            )
        logger.setLevel(level)
        logger.root.setLevel(level)
    return MultiProcessAdapter(logger, {})

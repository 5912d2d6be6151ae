"""Helpers around the environment variables that configure accel."""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import platform
import re
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

_logger = logging.getLogger("accel_state.env")

_ENV_PREFIXES = ("ACCEL_", "ACCELERATE_")
_FORBIDDEN = (";", "\n", "<", ">", " ")
_MIN_KERNEL = (5, 5, 0)
_PURGED = "_accel_purged_environment"

T = TypeVar("T")


def convert_dict_to_env_variables(current_env: Mapping[str, str]) -> list[str]:
    """Turn a mapping into ``"KEY=value\\n"`` lines, skipping unsafe entries.

    An entry is skipped, with a warning naming it, when its key or value is empty or contains
    one of ``; \\n < >`` or a space (such a line could inject a command into a launcher script).

    Args:
        current_env: The variables to write.

    Returns:
        One ``"KEY=value\\n"`` string per safe entry, in the mapping's order.
    """
    lines = []
    for key, value in current_env.items():
        text = f"{key}{value}"
        if key and value and not any(char in text for char in _FORBIDDEN):
            lines.append(f"{key}={value}\n")
        else:
            _logger.warning(
                "Skipping environment variable %s=%r: keys and values must be non-empty and "
                "free of ';', newlines, '<', '>' and spaces.",
                key,
                value,
            )
    return lines


@contextlib.contextmanager
def _restored_library_environment() -> Iterator[None]:
    saved = {k: v for k, v in os.environ.items() if k.startswith(_ENV_PREFIXES)}
    try:
        yield
    finally:
        for key in [k for k in os.environ if k.startswith(_ENV_PREFIXES)]:
            if key not in saved:
                del os.environ[key]
        os.environ.update(saved)


def _purged_function(function: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with _restored_library_environment():
            return function(*args, **kwargs)

    setattr(wrapper, _PURGED, True)
    return wrapper


def _purge_test_methods(cls: type) -> None:
    for name in dir(cls):
        method = getattr(cls, name)
        if name.startswith("test") and callable(method) and not hasattr(method, _PURGED):
            setattr(cls, name, _purged_function(method))


def purge_accel_environment(func_or_cls: T) -> T:
    """Undo, after each call, every ``ACCEL_*`` / ``ACCELERATE_*`` variable change it made.

    Decorate a function, or a test class (each ``test*`` method is wrapped, also in
    subclasses). Variables the call adds are removed; variables it changes or deletes get
    their earlier values back. Also available under the reference's name
    ``purge_accelerate_environment``.

    Example:
        >>> @purge_accel_environment
        ... def test_fp16():
        ...     os.environ["ACCEL_MIXED_PRECISION"] = "fp16"  # gone after the test
    """
    if not isinstance(func_or_cls, type):
        return _purged_function(func_or_cls)  # type: ignore[arg-type, return-value]
    cls = func_or_cls
    _purge_test_methods(cls)
    original = cls.__dict__.get("__init_subclass__")

    def __init_subclass__(subclass: type, **kwargs: Any) -> None:
        if original is not None:
            original.__func__(subclass, **kwargs)
        _purge_test_methods(subclass)

    cls.__init_subclass__ = classmethod(__init_subclass__)  # type: ignore[assignment]
    return func_or_cls


purge_accelerate_environment = purge_accel_environment


def check_os_kernel() -> None:
    """Warn when the Linux kernel is older than 5.5.0, where distributed runs can hang.

    Does nothing on other systems or on a recent kernel. The warning goes to this module's
    logger (``logging``), once per call.
    """
    info = platform.uname()
    if info.system != "Linux":
        return
    match = re.search(r"(\d+)\.(\d+)\.(\d+)", info.release)
    if match is None:
        return
    kernel = tuple(int(part) for part in match.groups())
    if kernel < _MIN_KERNEL:
        # Formatted here, not by logging: code written for the reference reads the record's msg.
        version = ".".join(map(str, kernel))
        _logger.warning(
            f"Detected kernel version {version}, which is below the recommended minimum of "
            "5.5.0; this can cause the process to hang. Upgrade the kernel to 5.5.0 or newer."
        )

"""The building block of the ``require_*`` decorators, and the markers that need no condition
of the machine: ``skip``, ``slow``, ``run_first``, ``require_torch_min_version``."""

from __future__ import annotations

import unittest
from collections.abc import Callable
from functools import partial
from typing import Any

from accel_state import is_pytest_available, is_torch_version, parse_flag_from_env


def requirement(name: str, condition: Callable[[], bool], needs: str, how: str) -> Any:
    """A decorator named ``name`` that skips a test (or every test of a class) unless
    ``condition()`` holds when the test is decorated.

    Args:
        name: The decorator's public name.
        condition: Read once, when the decorator is applied.
        needs: What the test needs, in words (``"a CUDA GPU"``): the skip reason starts
            ``"test requires <needs>"``, as the reference's reasons do.
        how: What is missing here and how to get it, appended to the reason.
    """

    def decorator(test_case: Any) -> Any:
        reason = f"test requires {needs}: {how}"
        return unittest.skipUnless(condition(), reason)(test_case)

    decorator.__name__ = decorator.__qualname__ = name
    decorator.__doc__ = (
        f"Skip the decorated test (or test class) unless this machine has {needs}.\n\n"
        f"The skip reason says what is missing: {how}.\n\n"
        "Args:\n    test_case: A test function or ``unittest.TestCase`` class.\n\n"
        "Returns:\n    ``test_case``, marked to be skipped when the requirement is not met."
    )
    return decorator


def skip(test_case: Any) -> Any:
    """Skip the decorated test always (reason ``"Test was skipped"``).

    Args:
        test_case: A test function or ``unittest.TestCase`` class.
    """
    return unittest.skip("Test was skipped")(test_case)


def slow(test_case: Any) -> Any:
    """Skip the decorated test unless ``RUN_SLOW`` is set to a true value (``1``, ``yes``,
    ``true``), read when the test is decorated.

    Args:
        test_case: A test function or ``unittest.TestCase`` class.

    Raises:
        ValueError: ``RUN_SLOW`` holds a value that is neither true nor false.
    """
    run_slow = parse_flag_from_env("RUN_SLOW", default=False)
    return unittest.skipUnless(run_slow, "test is slow: set RUN_SLOW=1 to run it")(test_case)


def run_first(test_case: Any) -> Any:
    """Mark a test to run before the others (``pytest.mark.order(1)``, honoured by the
    pytest-order plugin). Without pytest the test is returned unchanged.

    Useful where a device can be held by one process at a time: tests that start processes
    run first, before others hold the device.

    Args:
        test_case: A test function or class.
    """
    if not is_pytest_available():
        return test_case
    import pytest

    return pytest.mark.order(1)(test_case)


def require_torch_min_version(test_case: Any = None, version: str | None = None) -> Any:
    """Skip the decorated test unless the installed torch is at least ``version``.

    Use it as ``@require_torch_min_version(version="2.5")``, or call it with both arguments.

    Args:
        test_case: A test function or class; omitted when used with ``version=`` only.
        version: The lowest torch release the test runs on (``"2.5.0"``).

    Raises:
        ValueError: ``version`` is not given.
    """
    if version is None:
        raise ValueError(
            "require_torch_min_version needs the lowest torch release the test runs on; got "
            "version=None. Write @require_torch_min_version(version='2.5.0')."
        )
    if test_case is None:
        return partial(require_torch_min_version, version=version)
    import torch

    reason = f"test requires torch version >= {version}: torch {torch.__version__} is installed"
    return unittest.skipUnless(is_torch_version(">=", version), reason)(test_case)


__all__ = ["require_torch_min_version", "requirement", "run_first", "skip", "slow"]

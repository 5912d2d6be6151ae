"""``unittest`` bases and small assertions for tests of accel code (and of code written for the
reference library)."""

from __future__ import annotations

import contextlib
import io
import shutil
import tempfile
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any


class TempDirTestCase(unittest.TestCase):
    """A test case with one temporary folder, ``self.tmpdir``, for the whole class.

    The folder is created before the first test of the class and removed after the last; its
    contents are emptied before each test unless the class sets ``clear_on_setup = False``.
    For code that needs one fixed folder across tests (a tracker's run directory ...).
    """

    clear_on_setup = True
    tmpdir: Path

    @classmethod
    def setUpClass(cls) -> None:
        """Create the class's folder, ``cls.tmpdir``."""
        cls.tmpdir = Path(tempfile.mkdtemp())

    @classmethod
    def tearDownClass(cls) -> None:
        """Remove the class's folder and what it holds."""
        shutil.rmtree(cls.tmpdir, ignore_errors=True)

    def setUp(self) -> None:
        """Empty ``self.tmpdir`` (keeping the folder itself) when ``clear_on_setup``."""
        if not self.clear_on_setup:
            return
        for path in self.tmpdir.iterdir():
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            else:
                path.unlink()


class AccelerateTestCase(unittest.TestCase):
    """A test case that forgets the shared state (``AcceleratorState``, ``PartialState``,
    ``GradientState``) after each test, so no test sees an ``Accelerator`` an earlier one
    made."""

    def tearDown(self) -> None:
        """Run the test case's own tear-down, then reset the shared state."""
        from accel_state.testing import reset_state

        super().tearDown()
        reset_state()


class MockingTestCase(unittest.TestCase):
    """A test case that starts patches in ``setUp`` and stops them after each test.

    Call ``self.add_mocks(...)`` at the end of ``setUp`` (after ``super().setUp()``) with
    patches that need something known only then (a folder made in ``setUpClass`` ...).
    """

    mocks: list[Any]

    def add_mocks(self, mocks: Any) -> None:
        """Start ``mocks`` now and stop them when the test ends.

        Args:
            mocks: One ``unittest.mock.patch``-style object (anything with ``start`` and
                ``stop``) or a list or tuple of them.
        """
        self.mocks = list(mocks) if isinstance(mocks, (list, tuple)) else [mocks]
        for patcher in self.mocks:
            patcher.start()
            self.addCleanup(patcher.stop)


def are_the_same_tensors(tensor: Any) -> bool:
    """Whether every process holds the same values as this one in ``tensor``.

    A collective: every process of the run must call it, with tensors of one shape.

    Args:
        tensor: A tensor of any shape.
    """
    import torch
    from accel_collectives import gather
    from accel_state import AcceleratorState

    device = AcceleratorState().device
    mine = tensor[None].clone().to(device)
    everyone = gather(mine).cpu()
    own = mine[0].cpu()
    return all(torch.equal(everyone[i], own) for i in range(everyone.shape[0]))


@contextlib.contextmanager
def assert_exception(
    exception_class: type[BaseException], msg: str | None = None
) -> Iterator[None]:
    """Assert that the block raises ``exception_class`` (or a subclass), with ``msg`` in its
    message when given.

    Args:
        exception_class: The exception type the block must raise.
        msg: Text the exception's message must contain.

    Raises:
        AssertionError: The block raised nothing, another type, or a message without ``msg``.
    """
    try:
        yield
    except Exception as err:
        if not isinstance(err, exception_class):
            raise AssertionError(
                f"Expected exception of type {exception_class} but got {type(err)}: {err}"
            ) from err
        if msg is not None and msg not in str(err):
            raise AssertionError(
                f"Expected message '{msg}' to be in exception but got '{err}'"
            ) from err
        return
    raise AssertionError(f"Expected exception of type {exception_class} but ran without issue.")


def capture_call_output(func: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    """What ``func(*args, **kwargs)`` prints to ``sys.stdout``, as one string.

    Exceptions of ``func`` propagate (stdout is restored first).
    """
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        func(*args, **kwargs)
    return buffer.getvalue()


__all__ = [
    "AccelerateTestCase",
    "MockingTestCase",
    "TempDirTestCase",
    "are_the_same_tensors",
    "assert_exception",
    "capture_call_output",
]

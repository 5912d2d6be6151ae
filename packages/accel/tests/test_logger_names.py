"""The table of the reference's logger names accel logs under while it serves ``accelerate``."""

from __future__ import annotations

import importlib
import importlib.util
import logging
import re
from pathlib import Path

import pytest

from accel._reexports._logger_names import REFERENCE_LOGGER_NAMES, reference_logger_name


def _record(name: str, function: str) -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, "text", None, None, function)


def test_a_function_key_wins_over_its_logger_key():
    assert reference_logger_name(_record("accel_state.env", "check_os_kernel")) == (
        "accelerate.utils.other"
    )
    assert reference_logger_name(_record("accel_state.env", "other")) == (
        "accelerate.utils.environment"
    )
    assert reference_logger_name(_record("user.module", "main")) is None


def _logger_names_in_sources() -> set[str]:
    """The names every ``logging.getLogger("...")`` of the packages' sources uses."""
    root = Path(__file__).resolve().parents[2]
    pattern = re.compile(r"""logging\.getLogger\(\s*["']([\w.]+)["']\s*\)""")
    names: set[str] = set()
    for path in root.glob("*/src/**/*.py"):
        names.update(pattern.findall(path.read_text()))
    return names


@pytest.mark.parametrize("key", sorted(REFERENCE_LOGGER_NAMES))
def test_every_entry_names_an_accel_logger_and_a_reference_module_path(key: str):
    logger_name, _, function = key.partition(":")
    if logger_name.startswith("accel."):  # the facade's own modules log under __name__
        assert importlib.util.find_spec(logger_name) is not None, f"{logger_name} is no module"
    else:
        assert logger_name in _logger_names_in_sources(), f"no accel module logs on {logger_name}"
    if function:
        package = importlib.import_module(logger_name.split(".")[0])
        assert callable(getattr(package, function, None)), key
    target = REFERENCE_LOGGER_NAMES[key]
    assert target.startswith("accelerate."), target
    # accel serves every reference module path it mirrors at the same path under ``accel``.
    mirror = "accel" + target[len("accelerate") :]
    assert importlib.util.find_spec(mirror) is not None, f"{target}: accel has no {mirror}"

"""The table of the reference's logger names accel logs under while it serves ``accelerate``."""

from __future__ import annotations

import importlib
import importlib.util
import logging

import pytest

from accel._reexports._logger_names import REFERENCE_LOGGER_NAMES, reference_logger_name


def _record(name: str, function: str) -> logging.LogRecord:
    return logging.LogRecord(name, logging.WARNING, __file__, 1, "text", None, None, function)


def test_a_function_key_wins_over_its_logger_key():
    assert reference_logger_name(_record("accel_state._env._tools", "check_os_kernel")) == (
        "accelerate.utils.other"
    )
    assert reference_logger_name(_record("accel_state._env._tools", "other")) == (
        "accelerate.utils.environment"
    )
    assert reference_logger_name(_record("user.module", "main")) is None


@pytest.mark.parametrize("key", sorted(REFERENCE_LOGGER_NAMES))
def test_every_entry_names_an_accel_logger_and_a_reference_module_path(key: str):
    logger_name, _, function = key.partition(":")
    assert importlib.util.find_spec(logger_name) is not None, f"{logger_name} is no module"
    if function:
        assert callable(getattr(importlib.import_module(logger_name), function, None)), key
    target = REFERENCE_LOGGER_NAMES[key]
    assert target.startswith("accelerate."), target
    # accel serves every reference module path it mirrors at the same path under ``accel``.
    mirror = "accel" + target[len("accelerate") :]
    assert importlib.util.find_spec(mirror) is not None, f"{target}: accel has no {mirror}"

"""Run each test once across the CI steps.

The minimal-installs step runs every package's own tests in a venv that holds only that package.
With ``ACCEL_RECORD_PASSED=<file>`` this plugin appends each test that passed there (setup, call
and teardown) to the file, keyed by the test file's absolute path and the test's name inside it,
so the key does not depend on pytest's rootdir. The workspace step then runs with
``ACCEL_SKIP_PASSED=<file>`` and deselects those tests: a test that skipped or failed in the
package-alone venv, or did not run there (soak tests, the cross-package suite), runs again in
the full workspace. The summary line names how many were left out and why (under
pytest-xdist too: each worker deselects, the controller prints the count).

Load it with ``-p accel_run_once`` and this folder on ``PYTHONPATH``.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

RECORD = "ACCEL_RECORD_PASSED"
SKIP = "ACCEL_SKIP_PASSED"


def _key(item: pytest.Item) -> str:
    inner = item.nodeid.split("::", 1)[1] if "::" in item.nodeid else item.name
    return f"{Path(str(item.path)).resolve()}::{inner}"


_outcomes: dict[str, bool] = {}
_left_out = 0


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo) -> object:
    outcome = yield
    path = os.environ.get(RECORD)
    if not path:
        return
    report = outcome.get_result()
    key = _key(item)
    ok = _outcomes.get(key, True) and report.passed
    if report.when == "call":
        _outcomes[key] = ok
    elif report.when == "setup":
        _outcomes[key] = report.passed
    elif report.when == "teardown":
        if ok and key in _outcomes and report.passed:
            with open(path, "a", encoding="utf-8") as out:
                out.write(key + "\n")
        _outcomes.pop(key, None)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    global _left_out
    path = os.environ.get(SKIP)
    if not path or not Path(path).is_file():
        return
    passed = set(Path(path).read_text(encoding="utf-8").splitlines())
    keep, drop = [], []
    for item in items:
        (drop if _key(item) in passed else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
        _left_out = len(drop)
        # Under pytest-xdist each worker collects and deselects; the count reaches the
        # controller, which prints the summary, through the worker's output.
        worker_output = getattr(config, "workeroutput", None)
        if worker_output is not None:
            worker_output["accel_left_out"] = _left_out


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    global _left_out
    worker_output = getattr(node, "workeroutput", None) or {}
    _left_out = max(_left_out, int(worker_output.get("accel_left_out", 0)))


def pytest_terminal_summary(terminalreporter: object) -> None:
    if _left_out:
        terminalreporter.write_line(  # type: ignore[attr-defined]
            f"{_left_out} tests not run again: they passed in their package-alone environment "
            f"(minimal installs step; {SKIP})"
        )

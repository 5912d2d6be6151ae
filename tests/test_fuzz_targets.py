"""Every input the fuzzers found a defect with (tests/fuzz_regressions/<target>/) still reads
as a result or a named error, and every target's seeds (real saves) still read without error.

The campaign itself is ``python tools/fuzz.py`` (docs/untrusted-files.md); this replays what it
found, in one process per target, under the same per-input wall-time limit.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REGRESSIONS = ROOT / "tests" / "fuzz_regressions"
sys.path.insert(0, str(ROOT / "tools"))

from fuzzing import worker  # noqa: E402
from fuzzing.registry import load_all  # noqa: E402

TARGETS = sorted(load_all())


def _inputs(name: str) -> list[Path]:
    folder = REGRESSIONS / name
    return sorted(folder.glob("*.bin")) if folder.is_dir() else []


def test_every_regression_folder_names_a_target() -> None:
    folders = {p.name for p in REGRESSIONS.iterdir() if p.is_dir()}
    assert folders <= set(TARGETS), sorted(folders - set(TARGETS))


@pytest.mark.parametrize("name", [n for n in TARGETS if _inputs(n)])
def test_found_inputs_read_as_a_result_or_a_named_error(name: str, tmp_path: Path) -> None:
    session, _ = worker.prepared(name, tmp_path)
    try:
        assert session.findings == {}, f"a seed of {name} does not read: {session.findings}"
        escaped = {}
        for path in _inputs(name):
            finding, exc, _ = session.check(path.read_bytes())
            if finding is not None:
                escaped[path.name] = f"{finding.kind} at {finding.where}: {finding.message}"
        assert escaped == {}
    finally:
        session.close()

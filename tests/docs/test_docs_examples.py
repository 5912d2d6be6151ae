"""Every python block of the docs and the README runs, so the docs cannot rot.

Single-process blocks run page by page in one subprocess (``run_pages.py``); blocks marked
``<!-- docs-test: launch N -->`` run together in one ``accel launch --num_processes N``
(``run_launch_blocks.py``). Marks are described in ``markdown_blocks.py``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from accel_state.testing import run_command

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from markdown_blocks import ROOT, MarkError, blocks, pages  # noqa: E402

ALL = {path.relative_to(ROOT).as_posix(): blocks(path) for path in pages()}
RUN_PAGES = sorted(page for page, found in ALL.items() if any(b.kind == "run" for b in found))
LAUNCHES = sorted({int(b.argument) for found in ALL.values() for b in found if b.kind == "launch"})
MAX_SKIPS = 12
"""Skips stay few: each needs a reason a reviewer accepts (a second machine, a GPU)."""


def test_marks_are_well_formed_and_skips_few(tmp_path: Path) -> None:
    skips = [b for found in ALL.values() for b in found if b.kind == "skip"]
    assert len(skips) <= MAX_SKIPS, [f"{b.where}: {b.argument}" for b in skips]
    assert all(b.argument for b in skips)
    bad = tmp_path / "bad.md"
    bad.write_text("<!-- docs-test: skip -->\n```python\nx = 1\n```\n", encoding="utf-8")
    with pytest.raises(MarkError, match="is not one of"):
        blocks(bad, root=tmp_path)
    dangling = tmp_path / "dangling.md"
    text = "<!-- docs-test: launch 2 -->\ntext\n```python\nx = 1\n```\n"
    dangling.write_text(text, encoding="utf-8")
    with pytest.raises(MarkError, match="must be followed by a python block"):
        blocks(dangling, root=tmp_path)
    hidden = tmp_path / "hidden.md"
    hidden.write_text("<!-- docs-test: setup\ny = 2\n-->\n```python\nx = y\n```\n")
    assert [(b.kind, b.code, b.line) for b in blocks(hidden, root=tmp_path)] == [
        ("setup", "y = 2\n", 2),
        ("run", "x = y\n", 5),
    ]


@pytest.fixture(scope="module")
def page_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    """Run every page's single-process blocks once, in one subprocess."""
    out = tmp_path_factory.mktemp("docs") / "results.json"
    run_command(
        [sys.executable, str(HERE / "run_pages.py"), str(out), *RUN_PAGES],
        timeout=240,
        env={"PYTHONPATH": str(HERE)},
    )
    return json.loads(out.read_text(encoding="utf-8"))


@pytest.mark.parametrize("page", RUN_PAGES)
def test_page_examples_run(page: str, page_results: dict[str, dict[str, object]]) -> None:
    result = page_results[page]
    assert result["error"] is None, f"a python block of {page} failed:\n{result['error']}"
    assert result["ran"] == sum(b.kind in ("run", "setup") for b in ALL[page])


@pytest.mark.multiprocess
@pytest.mark.parametrize("num_processes", LAUNCHES)
def test_multiprocess_examples_run(num_processes: int, tmp_path: Path) -> None:
    chosen = [
        {"page": b.page, "line": b.line, "code": b.code}
        for found in ALL.values()
        for b in found
        if b.kind == "launch" and int(b.argument) == num_processes
    ]
    spec = tmp_path / "blocks.json"
    spec.write_text(json.dumps(chosen), encoding="utf-8")
    result = run_command(
        [
            sys.executable,
            "-m",
            "accel_launch.cli",
            "launch",
            "--quiet",
            "--num_processes",
            str(num_processes),
            str(HERE / "run_launch_blocks.py"),
            str(spec),
            str(tmp_path / "work"),
        ],
        timeout=240,
        check=False,
    )
    output = result.stdout + result.stderr
    assert result.returncode == 0, output
    for block in chosen:
        passed = f"DOCS BLOCK PASSED {block['page']}:{block['line']}"
        assert output.count(passed) == num_processes, f"{passed} missing:\n{output}"

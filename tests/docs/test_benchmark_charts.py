"""benchmarks/_charts.py draws one PNG per table that compares numbers and puts it under its
table once; the committed results pages show the chart of each table it draws."""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

pytest.importorskip("matplotlib", reason="matplotlib is in the bench dependency group")

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import ROOT, load_module

RESULTS = ROOT / "benchmarks" / "results"
charts = load_module("benchmarks/_charts.py")

PAGE = """# Demo

## Load time

| run | load (s) | peak RSS |
| --- | ---: | ---: |
| accel, in RAM | 0.01 | 0.94 GiB |
| accelerate, in RAM | 0.86 | 0.93 GiB |
| raw torch | 0.50 | 1.00 GiB |

- a note

| setting | value |
| --- | --- |
| threads | one |
"""


def test_one_chart_per_numeric_table_inserted_once(tmp_path: Path) -> None:
    page = tmp_path / "demo.md"
    page.write_text(PAGE, encoding="utf-8")
    assert charts.write_charts(page) == [tmp_path / "demo_1.png"]
    assert (tmp_path / "demo_1.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert not (tmp_path / "demo_2.png").exists()  # a table of words gets no chart
    first = page.read_text(encoding="utf-8")
    assert "| raw torch | 0.50 | 1.00 GiB |\n\n![Load time](demo_1.png)\n\n- a note" in first
    charts.write_charts(page)
    assert page.read_text(encoding="utf-8") == first


def test_charts_past_the_last_table_are_removed(tmp_path: Path) -> None:
    page = tmp_path / "demo.md"
    page.write_text(PAGE, encoding="utf-8")
    for name in ("demo_3.png", "demo_12.png", "demo_other_1.png"):
        (tmp_path / name).write_bytes(b"left by a run whose page had more tables")
    charts.write_charts(page)
    left = sorted(path.name for path in tmp_path.glob("*.png"))
    # two tables: demo_1 drawn, demo_2 not (words), the rest removed; another page's kept
    assert left == ["demo_1.png", "demo_other_1.png"]


def test_numbers_roles_and_settings() -> None:
    assert charts.number("167,574 (1.028x)") == 167574.0
    assert charts.number("error") is None
    assert [charts._role(text) for text in ("accel (us)", "accelerate", "raw torch")] == [
        "ours",
        "reference",
        "baseline",
    ]
    table = charts.tables(["| op | size | us |", "| - | - | - |", "| a | 1 KB | 3 |"])[0]
    table.rows += [["b", "1 KB", "5"], ["c", "1 KB", "4"]]
    assert charts.numeric_columns(table) == [2]  # a repeated size is a setting, not a result


def test_committed_results_show_their_charts() -> None:
    for image in sorted(RESULTS.glob("*.png")):
        page = RESULTS / (re.sub(r"_\d+$", "", image.stem) + ".md")
        assert f"]({image.name})" in page.read_text(encoding="utf-8"), image.name

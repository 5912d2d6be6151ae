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


def test_a_table_added_above_renumbers_the_chart_below(tmp_path: Path) -> None:
    page = tmp_path / "demo.md"
    page.write_text(PAGE, encoding="utf-8")
    charts.write_charts(page)
    table = PAGE.split("\n\n")[2]  # the load-time table
    text = page.read_text(encoding="utf-8")
    page.write_text(text.replace("## Load time", f"## Added\n\n{table}\n\n## Load time"))
    charts.write_charts(page)
    text = page.read_text(encoding="utf-8")
    assert text.count("(demo_1.png)") == 1 and text.count("(demo_2.png)") == 1
    assert text.index("(demo_1.png)") < text.index("## Load time") < text.index("(demo_2.png)")


def test_numbers_roles_and_settings() -> None:
    assert charts.number("167,574 (1.028x)") == 167574.0
    assert charts.number("error") is None
    assert [charts._role(text) for text in ("accel (us)", "accelerate", "raw torch")] == [
        "ours",
        "reference",
        "baseline",
    ]
    # A row that names its library first is that library's, whatever its launcher is called.
    labels = ("accel · 2 · torchrun", "accel · ACCEL_AS_ACCELERATE=1", "reference · torchrun")
    assert [charts._role(text) for text in labels] == ["ours", "ours", "reference"]
    table = charts.tables(["| op | size | us |", "| - | - | - |", "| a | 1 KB | 3 |"])[0]
    table.rows += [["b", "1 KB", "5"], ["c", "1 KB", "4"]]
    assert charts.numeric_columns(table) == [2]  # a repeated size is a setting, not a result


def test_committed_results_show_their_charts() -> None:
    for image in sorted(RESULTS.glob("*.png")):
        page = RESULTS / (re.sub(r"_\d+$", "", image.stem) + ".md")
        assert f"]({image.name})" in page.read_text(encoding="utf-8"), image.name


LONG = """# Demo

## Load of a checkpoint (us)

| reader | page cache | time (us) | × cat |
| --- | --- | ---: | ---: |
| accel load_state(verify_checksums=False) | warm | 94 | 0.80x |
| floor of a checked load: cat + one CRC-32 pass in memory | warm | 156 | 1.33x |
| accelerate load_state (unchecked) | cold | 1944 | 1.27x |
"""


def test_a_chart_has_a_legend_units_and_whole_labels() -> None:
    table = charts.tables(LONG.splitlines())[0]
    figure = charts.figure(table)
    try:
        assert figure.get_size_inches()[0] == charts.FIGURE_WIDTH
        axes = figure.get_axes()
        assert [axis.get_xlabel() for axis in axes] == ["time (µs)", "× cat (ratio)"]
        legend = axes[0].get_legend()
        assert [text.get_text() for text in legend.get_texts()] == [
            "accel",
            "accelerate (the reference library)",
            "baseline / floor",
        ]
        labels = [label.get_text() for label in axes[0].get_yticklabels()]
        assert all("..." not in label and "…" not in label for label in labels), labels
        assert "".join(labels[1].split()) == "floorofacheckedload:cat+oneCRC-32passinmemory·warm"
        assert axes[0].get_title(loc="left") == "Load of a checkpoint (µs)"
    finally:
        import matplotlib.pyplot as plt

        plt.close(figure)


def test_micro_seconds_are_written_us_nowhere() -> None:
    assert charts.micro("accel (us)") == "accel (µs)"
    assert charts.micro("plain (us/batch)") == "plain (µs/batch)"
    assert charts.micro("users · bus") == "users · bus"


def test_committed_charts_are_drawn_for_the_text_column() -> None:
    """Laid out 7.5 in wide at 180 dpi: twice the site's 675 px column (cropped to what is
    drawn), and never cut: a chart from an older helper (1458 px, labels cut) fails here."""
    from PIL import Image

    widths = {image.name: Image.open(image).size[0] for image in RESULTS.glob("*.png")}
    assert widths
    wrong = {name: width for name, width in widths.items() if not 1150 <= width <= 1450}
    assert not wrong, f"redraw with: python benchmarks/_charts.py benchmarks/results/*.md {wrong}"
    palette = {image.name for image in RESULTS.glob("*.png") if Image.open(image).mode != "P"}
    assert not palette, palette

"""Charts of the benchmark results: one PNG per markdown table where a chart helps.

Every benchmark script writes a markdown page to ``benchmarks/results/``; it then calls
``write_charts(page)``, which reads each table of the page, draws the numeric columns as
horizontal bars (one panel per column, one bar per row: accel in blue, the reference library in
orange, baselines and floors in grey), saves ``<page>_<n>.png`` beside the page and puts the
image right under its table. Calling it again redraws the charts and leaves the page as it is.

Usage (needs matplotlib, in the ``bench`` dependency group):
    uv run --no-sync python benchmarks/_charts.py benchmarks/results/*.md
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from pathlib import Path

MAX_ROWS = 24
"""Tables with more rows are left without a chart: the bars would be unreadable."""
MAX_PANELS = 4
"""At most this many numeric columns are drawn, the first ones of the table."""

_NUMBER = re.compile(r"^[~<>≈]?\s*([-+]?\d[\d,]*(?:\.\d+)?)")
_IMAGE = re.compile(r"^!\[[^\]]*\]\(([^)]+\.png)\)\s*$")
_OURS, _REFERENCE, _BASELINE = "#1f77b4", "#ff7f0e", "#9e9e9e"
_BASELINE_WORDS = ("raw", "hand-written", "floor", "baseline", "plain", "torch", "cat ", "whole")


@dataclass
class Table:
    """A markdown table of a results page."""

    title: str
    """The heading above the table (or the page's title)."""
    header: list[str]
    rows: list[list[str]]
    end: int
    """Index of the page's line just after the table."""


def number(cell: str) -> float | None:
    """The number a cell starts with (``"1,234 (1.02x)"`` -> 1234.0), or None."""
    found = _NUMBER.match(cell.strip().strip("`*"))
    return float(found.group(1).replace(",", "")) if found else None


def _cells(line: str) -> list[str]:
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def tables(lines: list[str]) -> list[Table]:
    """Every table of a page, with the heading it sits under."""
    found, title, i = [], "", 0
    while i < len(lines):
        line = lines[i]
        if line.startswith("#"):
            title = line.lstrip("#").strip().strip("`")
        if line.startswith("|") and i + 1 < len(lines) and set(lines[i + 1]) <= set("|-: "):
            end = i + 2
            while end < len(lines) and lines[end].startswith("|"):
                end += 1
            rows = [_cells(row) for row in lines[i + 2 : end]]
            found.append(Table(title, _cells(line), rows, end))
            i = end
            continue
        i += 1
    return found


def numeric_columns(table: Table) -> list[int]:
    """Columns that hold measurements: at least 3 of 4 filled cells are numbers, in at least
    two rows, and the values vary (a column repeating a few values is a setting, a label)."""
    columns = []
    for column in range(1, len(table.header)):
        cells = [row[column] for row in table.rows if column < len(row) and row[column]]
        numbers = [number(cell) for cell in cells]
        parsed = sum(value is not None for value in numbers)
        varied = len(set(cells)) > len(cells) / 2
        if parsed >= 2 and parsed >= 0.75 * len(cells) and varied:
            columns.append(column)
    return columns


def _role(text: str) -> str:
    """``ours``, ``reference`` or ``baseline`` from a row label or a column header."""
    lowered = f"{text.lower()} "
    if "accelerate" in lowered or "reference" in lowered:
        return "reference"
    if any(word in lowered for word in _BASELINE_WORDS):
        return "baseline"
    return "ours"


_COLORS = {"ours": _OURS, "reference": _REFERENCE, "baseline": _BASELINE}


def _side_by_side(table: Table, numeric: list[int]) -> list[int]:
    """Numeric columns that each measure one side (raw, accel, reference), when the table
    compares the sides in columns; ratios are left out (the bars show them)."""
    sides = []
    for column in numeric:
        header = table.header[column].lower()
        if any(mark in header for mark in ("/", " vs", "ratio", "paired")):
            continue
        if "accel" in header or "ours" in header or "reference" in header or "raw" in header:
            sides.append(column)
    roles = {_role(table.header[column]) for column in sides}
    return sides if len(sides) >= 2 and "ours" in roles and len(roles) >= 2 else []


def _label(table: Table, row: list[str], numeric: list[int]) -> str:
    parts = [cell for i, cell in enumerate(row) if i not in numeric and cell and i < 3]
    text = " · ".join(part.replace("`", "") for part in parts)
    return text if len(text) <= 60 else text[:57] + "..."


def _values(table: Table, column: int) -> list[float]:
    return [(number(row[column]) if column < len(row) else None) or 0.0 for row in table.rows]


def _annotate(axis: object, bars: object, values: list[float]) -> None:
    for bar, value in zip(bars, values):  # type: ignore[call-overload]
        text = f"{value:,.4g}"
        axis.text(  # type: ignore[attr-defined]
            bar.get_width(),
            bar.get_y() + bar.get_height() / 2,
            f" {text}",
            va="center",
            fontsize=6,
        )


def draw(table: Table, path: Path) -> bool:
    """Draw ``table`` into ``path``; False (nothing written) when a chart would not help.

    A table that compares accel, the reference library and a baseline in columns gets one
    panel of grouped bars; any other table one panel per measured column (at most
    ``MAX_PANELS``), its rows coloured by what they measure.
    """
    numeric = numeric_columns(table)
    if not numeric or not 2 <= len(table.rows) <= MAX_ROWS:
        return False
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [_label(table, row, numeric) for row in table.rows]
    positions = list(range(len(labels)))
    sides = _side_by_side(table, numeric)
    if sides:
        height = 1.2 + 0.22 * len(table.rows) * len(sides)
        figure, axis = plt.subplots(figsize=(9.5, min(height, 14)))
        width = 0.8 / len(sides)
        for k, column in enumerate(sides):
            values = _values(table, column)
            header = table.header[column].replace("`", "")
            offsets = [p - 0.4 + width * (k + 0.5) for p in positions]
            color = _COLORS[_role(header)]
            bars = axis.barh(offsets, values, height=width, color=color, label=header)
            if _role(header) == "baseline" and k:
                for bar in bars:
                    bar.set_hatch("//")
            _annotate(axis, bars, values)
        axis.set_yticks(positions, labels, fontsize=7)
        axis.invert_yaxis()
        axis.grid(axis="x", alpha=0.3)
        axis.legend(fontsize=7, loc="best")
        axis.tick_params(labelsize=7)
    else:
        numeric = numeric[:MAX_PANELS]
        colors = [_COLORS[_role(label)] for label in labels]
        height = 1.0 + 0.32 * len(table.rows)
        figure, axes = plt.subplots(
            1,
            len(numeric),
            figsize=(3.2 * len(numeric) + 3.4, height),
            sharey=True,
            squeeze=False,
        )
        for axis, column in zip(axes[0], numeric):
            values = _values(table, column)
            bars = axis.barh(positions, values, color=colors)
            _annotate(axis, bars, values)
            axis.set_title(table.header[column].replace("`", ""), fontsize=8)
            axis.tick_params(labelsize=7)
            axis.invert_yaxis()
            axis.grid(axis="x", alpha=0.3)
            axis.margins(x=0.2)
        axes[0][0].set_yticks(positions, labels, fontsize=7)
    figure.suptitle(table.title.replace("`", ""), fontsize=9)
    figure.tight_layout()
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return True


def write_charts(page: str | Path) -> list[Path]:
    """Draw the charts of a results page and put each image under its table.

    Args:
        page: A markdown page of ``benchmarks/results/``.

    Returns:
        The PNG files written (``<page>_<n>.png``, n counting the page's tables from 1).
    """
    page = Path(page)
    lines = page.read_text(encoding="utf-8").splitlines()
    written: list[Path] = []
    inserts: list[tuple[int, str]] = []
    found = tables(lines)
    for index, table in enumerate(found, start=1):
        image = page.with_name(f"{page.stem}_{index}.png")
        if not draw(table, image):
            continue
        written.append(image)
        following = lines[table.end + 1] if table.end + 1 < len(lines) else ""
        present = _IMAGE.match(following)
        if present is None or present.group(1) != image.name:
            alt = re.sub(r"[`\[\]]", "", table.title)
            inserts.append((table.end, f"\n![{alt}]({image.name})"))
    for at, text in reversed(inserts):
        lines[at:at] = text.splitlines()
    page.write_text("\n".join(lines) + "\n", encoding="utf-8")
    _remove_stale_charts(page, len(found))
    return written


def _remove_stale_charts(page: Path, count: int) -> None:
    """Delete the page's charts numbered past its last table (left by a run with more tables)."""
    numbered = re.compile(rf"{re.escape(page.stem)}_(\d+)\.png")
    for image in page.parent.glob(f"{page.stem}_*.png"):
        match = numbered.fullmatch(image.name)
        if match is not None and int(match.group(1)) > count:
            image.unlink()


def main(argv: list[str]) -> int:
    """Draw the charts of every page given."""
    if not argv:
        print(__doc__)
        return 2
    for page in argv:
        for image in write_charts(page):
            print(image)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

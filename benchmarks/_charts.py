"""Charts of the benchmark results: one PNG per markdown table where a chart helps.

Every benchmark script writes a markdown page to ``benchmarks/results/``; it then calls
``write_charts(page)``, which reads each table of the page, draws the numeric columns as
horizontal bars (one panel per column, stacked, one bar per row: accel in blue, the reference
library in orange, baselines and floors in grey, with a legend of the colours and each axis's
unit), saves ``<page>_<n>.png`` beside the page and puts the image right under its table.
Charts are laid out for the site's 675 px text column and saved at twice that resolution (the
site links each to its full-size image). Calling it again redraws the charts from the tables
and leaves the page as it is: no benchmark needs to run again.

Usage (needs matplotlib, in the ``bench`` dependency group):
    uv run --no-sync python benchmarks/_charts.py benchmarks/results/*.md
"""

from __future__ import annotations

import io
import re
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any

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
    """``ours``, ``reference`` or ``baseline`` from a row label or a column header; a label
    whose first word is ``accel`` or ``reference`` names its side, whatever follows (a
    launcher called ``torchrun``, the variable ``ACCEL_AS_ACCELERATE``)."""
    lowered = f"{text.lower()} "
    first = re.split(r"[^a-z]", lowered.lstrip(), maxsplit=1)[0]
    if first in ("accel", "reference"):
        return "ours" if first == "accel" else "reference"
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


LABEL_WIDTH = 34
"""Characters of a row label per line; a longer label wraps onto a second line (lines grow to
``LABEL_WIDTH + 16`` before the end of a label is elided)."""
FIGURE_WIDTH = 7.5
"""Inches; at ``DPI / 2`` this is the 675 px of the site's text column."""
DPI = 180
"""Twice the column's pixels: sharp at the column's width, and larger when opened alone."""
_FONT = 8
_UNIT = re.compile(r"^[~<>≈]?\s*[-+]?\d[\d,]*(?:\.\d+)?\s*([A-Za-zµ%/]+(?:/[A-Za-z]+)?)")
_LEGEND = {
    "ours": "accel",
    "reference": "accelerate (the reference library)",
    "baseline": "baseline / floor",
}


def micro(text: str) -> str:
    """``us`` as a unit written ``µs`` (``accel (us)`` -> ``accel (µs)``, ``us/batch`` too)."""
    return re.sub(r"(?<![A-Za-z])us(?![A-Za-z])", "µs", text)


def _wrap(text: str) -> str:
    """``text`` on at most two lines of ``LABEL_WIDTH`` characters (the rest elided)."""
    for width in (LABEL_WIDTH, LABEL_WIDTH + 8, LABEL_WIDTH + 16):
        lines = textwrap.wrap(text, width) or [""]
        if len(lines) <= 2:
            return "\n".join(lines)
    width = LABEL_WIDTH + 16
    return "\n".join([lines[0], textwrap.shorten(" ".join(lines[1:]), width, placeholder=" …")])


def _label(table: Table, row: list[str], numeric: list[int]) -> str:
    parts = [cell for i, cell in enumerate(row) if i not in numeric and cell and i < 3]
    return _wrap(micro(" · ".join(part.replace("`", "") for part in parts)))


def axis_label(table: Table, column: int) -> str:
    """What a panel's axis measures, with its unit: the column's header, plus the unit its cells
    carry when the header names none (``1.17x`` -> ratio, ``0.94 GiB`` -> GiB)."""
    header = micro(table.header[column].replace("`", ""))
    units = {
        found.group(1)
        for row in table.rows
        if column < len(row) and (found := _UNIT.match(row[column].strip().strip("`*")))
    }
    if len(units) == 1:
        unit = units.pop()
        unit = "ratio" if unit in ("x", "×") else micro(unit)
        if unit not in header:
            header += f" ({unit})"
    elif re.search(r"(^|\s)[×x](\s|$)|ratio|/ ?floor", header) and "ratio" not in header:
        header += " (ratio)"
    return header


def _values(table: Table, column: int) -> list[float]:
    return [(number(row[column]) if column < len(row) else None) or 0.0 for row in table.rows]


def _annotate(axis: Any, bars: Any, values: list[float]) -> None:
    for bar, value in zip(bars, values):
        axis.text(
            bar.get_width(),
            bar.get_y() + bar.get_height() / 2,
            f" {value:,.4g}",
            va="center",
            fontsize=_FONT - 1,
        )


def figure(table: Table) -> Any:
    """The chart of ``table`` as a matplotlib figure, or None when a chart would not help.

    A table that compares accel, the reference library and a baseline in columns gets one
    panel of grouped bars; any other table one panel per measured column (at most
    ``MAX_PANELS``), stacked so that each has the column's whole width, its rows coloured by
    what they measure. Every chart has a legend of its colours and each axis its unit.
    """
    numeric = numeric_columns(table)
    if not numeric or not 2 <= len(table.rows) <= MAX_ROWS:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    labels = [_label(table, row, numeric) for row in table.rows]
    positions = list(range(len(labels)))
    lines = sum(label.count("\n") + 1 for label in labels)
    sides = _side_by_side(table, numeric)
    if sides:
        height = 1.4 + 0.2 * len(table.rows) * len(sides) + 0.08 * lines
        fig, axis = plt.subplots(figsize=(FIGURE_WIDTH, height))
        width = 0.8 / len(sides)
        for k, column in enumerate(sides):
            values = _values(table, column)
            header = micro(table.header[column].replace("`", ""))
            offsets = [p - 0.4 + width * (k + 0.5) for p in positions]
            bars = axis.barh(
                offsets, values, height=width, color=_COLORS[_role(header)], label=header
            )
            if _role(header) == "baseline" and k:
                for bar in bars:
                    bar.set_hatch("//")
            _annotate(axis, bars, values)
        axis.set_yticks(positions, labels, fontsize=_FONT)
        axis.invert_yaxis()
        axis.grid(axis="x", alpha=0.3)
        axis.margins(x=0.15)
        axis.tick_params(labelsize=_FONT)
        units = {axis_label(table, c).rsplit("(", 1)[-1].rstrip(")") for c in sides}
        axis.set_xlabel(units.pop() if len(units) == 1 else "see the legend", fontsize=_FONT)
        axis.legend(
            fontsize=_FONT - 1, loc="lower left", bbox_to_anchor=(0, 1.0), ncol=2, frameon=False
        )
        axis.margins(y=0.02)
        axes, legend_rows = [axis], (len(sides) + 1) // 2
    else:
        numeric = numeric[:MAX_PANELS]
        colors = [_COLORS[_role(label)] for label in labels]
        panel = 0.6 + 0.2 * len(table.rows) + 0.08 * lines
        fig, grid = plt.subplots(
            len(numeric), 1, figsize=(FIGURE_WIDTH, 0.5 + panel * len(numeric)), squeeze=False
        )
        axes = [row[0] for row in grid]
        for axis, column in zip(axes, numeric):
            values = _values(table, column)
            bars = axis.barh(positions, values, color=colors)
            _annotate(axis, bars, values)
            axis.set_yticks(positions, labels, fontsize=_FONT)
            axis.set_xlabel(axis_label(table, column), fontsize=_FONT)
            axis.tick_params(labelsize=_FONT)
            axis.invert_yaxis()
            axis.grid(axis="x", alpha=0.3)
            axis.margins(x=0.15)
        roles = [role for role in _LEGEND if role in {_role(label) for label in labels}]
        handles = [Patch(color=_COLORS[role], label=_LEGEND[role]) for role in roles]
        axes[0].legend(
            handles=handles,
            fontsize=_FONT - 1,
            loc="lower left",
            bbox_to_anchor=(0, 1.0),
            ncol=len(handles),
            frameon=False,
        )
        legend_rows = 1
    # the title above the legend, both above the first panel (a figure title would overlap it)
    axes[0].set_title(
        textwrap.fill(micro(table.title.replace("`", "")), 60),
        fontsize=_FONT + 1,
        loc="left",
        pad=6 + 12 * legend_rows,
    )
    fig.tight_layout()
    return fig


def draw(table: Table, path: Path) -> bool:
    """Draw ``table`` into ``path``; False (nothing written) when a chart would not help.

    The image is cropped to what it draws (``bbox_inches="tight"``), so no label is cut.
    """
    fig = figure(table)
    if fig is None:
        return False
    import matplotlib.pyplot as plt
    from PIL import Image  # matplotlib's own dependency

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=DPI, bbox_inches="tight", pad_inches=0.1)
    plt.close(fig)
    # a few flat colours: a palette of 128 keeps the antialiasing and a third of the bytes
    image = Image.open(drawn).convert("RGB").quantize(colors=128)
    image.save(path, format="PNG", optimize=True)
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
    numbered = re.compile(rf"{re.escape(page.stem)}_\d+\.png")
    found = tables(lines)
    for index, table in enumerate(found, start=1):
        image = page.with_name(f"{page.stem}_{index}.png")
        if not draw(table, image):
            continue
        written.append(image)
        following = lines[table.end + 1] if table.end + 1 < len(lines) else ""
        present = _IMAGE.match(following)
        if present is not None and present.group(1) == image.name:
            continue
        alt = re.sub(r"[`\[\]]", "", table.title)
        if present is not None and numbered.fullmatch(present.group(1)):
            # the chart of this table under an older number (a table was added above it)
            lines[table.end + 1] = f"![{alt}]({image.name})"
        else:
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

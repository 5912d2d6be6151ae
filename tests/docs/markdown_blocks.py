"""Read the fenced ``python`` blocks of the documentation and the marks that say how to run them.

A mark is an HTML comment on the line before a block (invisible on the site):

- ``<!-- docs-test: skip REASON -->``: not run; the reason is required (a fragment, a second
  machine, a GPU);
- ``<!-- docs-test: launch N -->``: a whole script, run on N processes through ``accel launch``.

Every other block runs in one process, in page order, in one namespace per page (as a reader
who pastes them one after the other). A hidden block, ``<!-- docs-test: setup ... -->`` with
code inside the comment, runs at its place in that namespace: it builds what the page's
fragments take as given (a small model, a loader) without showing it to the reader.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"

_MARK = re.compile(r"<!--\s*docs-test:\s*(\w+)\s*(.*?)\s*-->", re.DOTALL)
_FENCE = re.compile(r"^(\s*)(`{3,}|~{3,})\s*([\w+-]*)")


@dataclass(frozen=True)
class Block:
    """One piece of code of a page and how the test runs it."""

    page: str
    """The page, relative to the repository root."""
    line: int
    """First line of the code in the page (1-based)."""
    code: str
    kind: str
    """``run``, ``setup``, ``skip`` or ``launch``."""
    argument: str = ""
    """The reason of a skip, the number of processes of a launch."""

    @property
    def where(self) -> str:
        """``docs/page.md:12``."""
        return f"{self.page}:{self.line}"


class MarkError(ValueError):
    """A docs-test mark that is malformed or not followed by a python block."""


def _dedent(lines: list[str], indent: str) -> str:
    return "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines)


def blocks(path: Path, root: Path = ROOT) -> list[Block]:
    """Every python block and hidden setup block of ``path``, in page order.

    Pages are named relative to ``root`` (the repository).

    Raises:
        MarkError: for an unknown mark, a skip without reason, a launch without a process
            count, or a mark not followed by a python block.
    """
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines()
    page = path.relative_to(root).as_posix()
    found: list[Block] = []
    pending: tuple[str, str, int] | None = None
    i = 0
    while i < len(lines):
        line = lines[i]
        mark = _MARK.search(line) if "docs-test:" in line else None
        if "docs-test:" in line and "-->" not in line:  # a setup comment over several lines
            end = next(j for j in range(i, len(lines)) if "-->" in lines[j])
            mark = _MARK.search("\n".join(lines[i : end + 1]))
            if mark is None or mark.group(1) != "setup":
                raise MarkError(f"{page}:{i + 1}: only a setup mark may span lines; fix the mark.")
            body = "\n".join(lines[i : end + 1])
            code = body.split("setup", 1)[1].rsplit("-->", 1)[0]
            found.append(Block(page, i + 2, code.strip("\n") + "\n", "setup"))
            i = end + 1
            continue
        if mark is not None:
            kind, argument = mark.group(1), mark.group(2)
            if kind == "setup":
                found.append(Block(page, i + 1, argument + "\n", "setup"))
            elif kind == "skip" and argument:
                pending = (kind, argument, i + 1)
            elif kind == "launch" and argument.isdigit() and int(argument) > 1:
                pending = (kind, argument, i + 1)
            else:
                raise MarkError(
                    f"{page}:{i + 1}: the mark {mark.group(0)!r} is not one of "
                    "'skip REASON', 'launch N' (N > 1), 'setup CODE'; fix the mark."
                )
            i += 1
            continue
        fence = _FENCE.match(line)
        if fence is None:
            if pending is not None and line.strip():
                raise MarkError(
                    f"{page}:{pending[2]}: a {pending[0]!r} mark must be followed by a python "
                    f"block, found {line.strip()!r}; move the mark above the block."
                )
            i += 1
            continue
        indent, ticks, language = fence.groups()
        end = next(
            (j for j in range(i + 1, len(lines)) if lines[j].strip().startswith(ticks)),
            len(lines),
        )
        if language in ("python", "py"):
            kind, argument = ("run", "") if pending is None else pending[:2]
            code = _dedent(lines[i + 1 : end], indent) + "\n"
            found.append(Block(page, i + 2, code, kind, argument))
        elif pending is not None:
            raise MarkError(
                f"{page}:{pending[2]}: a {pending[0]!r} mark is followed by a {language or 'plain'} "
                "block; marks apply to python blocks only: remove it."
            )
        pending = None
        i = end + 1
    return found


def pages() -> list[Path]:
    """The markdown pages of the site (``docs/``) and the repository's README."""
    return [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]

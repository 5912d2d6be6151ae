"""Rewrite the Sphinx roles of the packages' sources in the docs site's own link syntax.

The docstrings are rendered by mkdocstrings, whose cross-references are Markdown links to an
object's identifier (``[`prepare`][accel.Accelerator.prepare]``, resolved by autorefs); a Sphinx
role (``:meth:`prepare```) would print literally. This tool turns each role of
``packages/*/src`` into such a link when the site documents its target, else into a code span.

A target is looked up as written (``accel_data.skip_first_batches``), then under each object
that encloses the role in the source, innermost first (``:meth:`init_hook``` in a method of
``AlignDevicesHook`` finds ``accel_bigmodel.AlignDevicesHook.init_hook``), then at the top of
each package and on the ``Accelerator``. What the site documents is read from a built site:
the identifiers of its object headings.

    python tools/roles_to_links.py                  # build the site, rewrite every role
    python tools/roles_to_links.py --site build/site  # use a site built already
    python tools/roles_to_links.py --check          # exit 1 while a role is left
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ROLES = ("meth", "class", "func", "attr", "data", "obj", "mod", "exc", "const", "ref", "term")
ROLE = re.compile(r":(?:py:)?(?:" + "|".join(ROLES) + r"):`([^`]+)`")
"""A role as written in a source: ``:meth:`prepare```."""
RAW_ROLE = re.compile(r":(?:py:)?(?:" + "|".join(ROLES) + r"):(?:`|<code>|&#96;|[A-Za-z_~])")
"""Anything of a role, in a source or a rendered page (``:class:<code>X</code>``)."""
_OBJECT_ID = re.compile(r'<h\d[^>]*\bid="([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)"[^>]*class="doc')
_OBJECT_ID_AFTER = re.compile(r'<h\d[^>]*class="doc[^"]*"[^>]*\bid="([A-Za-z_]\w*(?:\.\w+)+)"')

SEARCHED_PREFIXES = (
    "accel",
    "accel.Accelerator",
    "accel_state",
    "accel_collectives",
    "accel_data",
    "accel_bigmodel",
    "accel_pipeline",
    "accel_precision",
    "accel_trackers",
    "accel_launch",
    "accel.utils",
    "accel.inference",
)
"""Where a target that is neither a full path nor a member of an enclosing object is looked for."""


def label(target: str) -> str:
    """The text shown for a target: ``~a.b.c`` shows ``c``; a leading ``.`` or ``!`` is dropped."""
    target = target.lstrip("!")
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target.lstrip(".")


def candidates(target: str, enclosing: str | None) -> list[str]:
    """The identifiers ``target`` may mean, most specific first."""
    name = target.lstrip("!~.").removesuffix("()")
    found = [name]
    if enclosing:
        parts = enclosing.split(".")
        found += [".".join([*parts[:i], name]) for i in range(len(parts), 0, -1)]
    found += [f"{prefix}.{name}" for prefix in SEARCHED_PREFIXES]
    return list(dict.fromkeys(found))


def _scopes(tree: ast.Module, package: str) -> list[tuple[int, int, str]]:
    """``(first line, last line, public path)`` of every class and function of a module."""
    found: list[tuple[int, int, str]] = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
                path = f"{prefix}.{child.name}"
                found.append((child.lineno, child.end_lineno or child.lineno, path))
                visit(child, path)

    visit(tree, package)
    return found


def convert(text: str, package: str, documented: Callable[[str], bool]) -> str:
    """``text`` (a module's source) with each role a link or a code span."""
    if not ROLE.search(text):
        return text
    scopes = _scopes(ast.parse(text), package)
    line_starts = [0]
    for line in text.splitlines(keepends=True):
        line_starts.append(line_starts[-1] + len(line))

    def enclosing(offset: int) -> str | None:
        line = next(i for i, start in enumerate(line_starts) if start > offset)
        inner = [s for s in scopes if s[0] <= line <= s[1]]
        return max(inner, key=lambda s: s[0])[2] if inner else package

    def replace(match: re.Match[str]) -> str:
        target = match.group(1)
        shown = label(target)
        for identifier in candidates(target, enclosing(match.start())):
            if documented(identifier):
                return f"[`{shown}`][{identifier}]"
        return f"`{shown}`"

    return ROLE.sub(replace, text)


def sources() -> list[Path]:
    return sorted(ROOT.glob("packages/*/src/**/*.py"))


def package_of(path: Path) -> str:
    src = next(p for p in path.parents if p.name == "src")
    return path.relative_to(src).parts[0]


def documented_identifiers(site: Path) -> set[str]:
    """The identifiers of the objects a built site documents (its object headings)."""
    found: set[str] = set()
    for page in site.rglob("*.html"):
        text = page.read_text(encoding="utf-8")
        found.update(_OBJECT_ID.findall(text))
        found.update(_OBJECT_ID_AFTER.findall(text))
    return found


def build_site(out: Path) -> None:
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    command = [sys.executable, "-m", "mkdocs", "build", "--quiet", "-d", str(out)]
    subprocess.run(command, cwd=ROOT, env=env, check=True)


def left_in(text: str) -> list[str]:
    """Each role left in ``text`` (a source or a rendered page), with its line's rest."""
    return [text[m.start() : m.start() + 60].split("\n")[0] for m in RAW_ROLE.finditer(text)]


def left(paths: Sequence[Path]) -> list[str]:
    """``file:line: role`` for each role left in ``paths``."""
    found = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        for match in RAW_ROLE.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            end = text.find("\n", match.start())
            found.append(f"{path.relative_to(ROOT)}:{line}: {text[match.start() : end].strip()}")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Exit 1 while a role is left.")
    parser.add_argument("--site", type=Path, help="A built site (else one is built).")
    args = parser.parse_args()
    if args.check:
        found = left(sources())
        if found:
            print(
                "Sphinx roles print literally on the docs site; write "
                "[`name`][package.name] (or `name`), or run python tools/roles_to_links.py:\n"
                + "\n".join(found),
                file=sys.stderr,
            )
        return 1 if found else 0
    with tempfile.TemporaryDirectory() as scratch:
        site = args.site
        if site is None:
            site = Path(scratch) / "site"
            build_site(site)
        known = documented_identifiers(site)
    changed = 0
    for path in sources():
        text = path.read_text(encoding="utf-8")
        new = convert(text, package_of(path), known.__contains__)
        if new != text:
            path.write_text(new, encoding="utf-8")
            changed += 1
    print(f"rewrote the roles of {changed} file(s) ({len(known)} documented identifiers)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

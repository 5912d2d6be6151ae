"""Write the environment variable tables of the docs from ``accel_state.environment_variables``
and accel-bigmodel's own declarations (``accel_bigmodel._bigmodel_variables``).

The tables sit between ``<!-- env-table:start -->`` and ``<!-- env-table:end -->`` in
``docs/launch.md`` (every variable) and between ``<!-- env-fallbacks:start -->`` and
``<!-- env-fallbacks:end -->`` in ``docs/migration.md`` (the reference names honoured).

Usage:
    python tools/gen_env_docs.py          # rewrite the tables
    python tools/gen_env_docs.py --check  # exit 1 when a committed table is stale
"""

from __future__ import annotations

import argparse
import ast
import sys
from pathlib import Path
from typing import Any

from accel_bigmodel import _bigmodel_variables as bigmodel_variables
from accel_state import environment_variables

ROOT = Path(__file__).resolve().parents[1]
TABLES = {
    ROOT / "docs" / "launch.md": "env-table",
    ROOT / "docs" / "migration.md": "env-fallbacks",
}


def docstrings() -> dict[str, str]:
    """Constant name -> the docstring written under it in the source of the contract module
    and of the ``_env/`` modules it re-exports declarations from."""
    folder = Path(environment_variables.__file__).parent / "_env"
    body = []
    for path in [Path(environment_variables.__file__), *sorted(folder.glob("_*.py"))]:
        body += ast.parse(path.read_text(encoding="utf-8")).body
    found = {}
    for statement, following in zip(body, body[1:]):
        if (
            isinstance(statement, ast.AnnAssign)
            and isinstance(statement.target, ast.Name)
            and isinstance(following, ast.Expr)
            and isinstance(following.value, ast.Constant)
            and isinstance(following.value.value, str)
        ):
            found[statement.target.id] = " ".join(following.value.value.split())
    return found


def _cell(text: str) -> str:
    return text.replace("``", "`").replace("|", "\\|")


def variables_table() -> str:
    """Markdown table of every declared variable."""
    docs = docstrings()
    lines = [
        "| variable | reference name (fallback) | value | written by | read by | meaning |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name, spec in _variables():
        fallbacks = ", ".join(f"`{fallback}`" for fallback in spec.fallbacks) or "none"
        row = (f"`{name}`", fallbacks, spec.vocabulary(), spec.written_by, spec.read_by)
        lines.append("| " + " | ".join(_cell(part) for part in (*row, _meaning(name, docs))) + " |")
    return "\n".join(lines)


def _variables() -> list[tuple[str, Any]]:
    """The contract's variables, then accel-bigmodel's (declared in that package alone)."""
    return [*environment_variables.VARIABLES.items(), *bigmodel_variables.VARIABLES.items()]


def _meaning(name: str, docs: dict[str, str]) -> str:
    own = bigmodel_variables.VARIABLES.get(name)
    return own.description if own is not None else docs.get(name, "")


def fallbacks_table() -> str:
    """Markdown table of the reference names read as fallbacks."""
    lines = ["| reference name | read as | meaning |", "| --- | --- | --- |"]
    docs = docstrings()
    for name, spec in _variables():
        for fallback in spec.fallbacks:
            lines.append(f"| `{fallback}` | `{name}` | {_cell(_meaning(name, docs))} |")
    return "\n".join(lines)


def render(text: str, marker: str, table: str) -> str:
    """``text`` with the block between the ``marker`` comments replaced by ``table``.

    Raises:
        ValueError: when the markers are missing.
    """
    start, end = f"<!-- {marker}:start -->", f"<!-- {marker}:end -->"
    if start not in text or end not in text:
        raise ValueError(
            f"the document must hold the markers {start} and {end} around the generated table; "
            "got neither pair. Add both lines where the table goes."
        )
    head, rest = text.split(start, 1)
    _, tail = rest.split(end, 1)
    return f"{head}{start}\n{table}\n{end}{tail}"


def expected() -> dict[Path, str]:
    """Each document as it should be."""
    tables = {"env-table": variables_table(), "env-fallbacks": fallbacks_table()}
    return {
        path: render(path.read_text(encoding="utf-8"), marker, tables[marker])
        for path, marker in TABLES.items()
    }


def main(argv: list[str] | None = None) -> int:
    """Rewrite the tables, or with ``--check`` report the stale ones (exit status 1)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only report stale tables")
    args = parser.parse_args(argv)
    stale = []
    for path, text in expected().items():
        if path.read_text(encoding="utf-8") != text:
            stale.append(path)
            if not args.check:
                path.write_text(text, encoding="utf-8")
    if args.check and stale:
        names = ", ".join(str(path.relative_to(ROOT)) for path in stale)
        print(f"stale environment tables in {names}; run: python tools/gen_env_docs.py")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Count ``Any`` in the parameter and return annotations of each package, against a budget.

Each package may hold at most the number of ``Any`` annotations that ``tools/any_budget.json``
allows it, and the budget only falls: a change that adds one fails, and a change that removes
some asks to lower the budget to the new count, so that it cannot come back unnoticed.

An annotation counts once when ``Any`` appears anywhere in it (``Any``, ``dict[str, Any]``,
``typing.Any``, a string annotation naming it); ``*args`` and ``**kwargs`` count like any
parameter. Only the sources count (``packages/*/src/**/*.py``), not the generated stubs.

    python tools/any_budget.py           # print the counts per package
    python tools/any_budget.py --check   # exit 1 when a count is not its budget
    python tools/any_budget.py --write   # set the budget to the current counts
"""

from __future__ import annotations

import argparse
import ast
import json
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BUDGET = ROOT / "tools" / "any_budget.json"


@dataclass
class Count:
    """The annotations of one package: how many, and how many of them use ``Any``."""

    parameters: int = 0
    parameters_any: int = 0
    returns: int = 0
    returns_any: int = 0

    @property
    def any(self) -> int:
        return self.parameters_any + self.returns_any


def _uses_any(annotation: ast.expr | None) -> bool:
    if annotation is None:
        return False
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name) and node.id == "Any":
            return True
        if isinstance(node, ast.Attribute) and node.attr == "Any":
            return True
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                inner = ast.parse(node.value, mode="eval").body
            except SyntaxError:
                continue
            if _uses_any(inner):
                return True
    return False


def count_source(text: str, into: Count | None = None) -> Count:
    """The annotations of one module's source text."""
    count = into if into is not None else Count()
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        arguments = node.args
        parameters = [
            *arguments.posonlyargs,
            *arguments.args,
            *arguments.kwonlyargs,
            *(a for a in (arguments.vararg, arguments.kwarg) if a is not None),
        ]
        for parameter in parameters:
            if parameter.annotation is not None:
                count.parameters += 1
                count.parameters_any += _uses_any(parameter.annotation)
        if node.returns is not None:
            count.returns += 1
            count.returns_any += _uses_any(node.returns)
    return count


def counts(root: Path = ROOT) -> dict[str, Count]:
    """Each package (by its directory name under ``packages/``) with its count."""
    found: dict[str, Count] = {}
    for package in sorted(p for p in (root / "packages").iterdir() if (p / "src").is_dir()):
        count = Count()
        for path in sorted((package / "src").rglob("*.py")):
            count_source(path.read_text(encoding="utf-8"), count)
        found[package.name] = count
    return found


def problems(current: dict[str, int], budget: dict[str, int]) -> list[str]:
    """What is wrong with ``current`` against ``budget``: one line per package."""
    found = []
    for package, value in sorted(current.items()):
        allowed = budget.get(package)
        if allowed is None:
            found.append(
                f"{package}: has no budget in tools/any_budget.json; add it with "
                f'"{package}": {value} (python tools/any_budget.py --write)'
            )
        elif value > allowed:
            found.append(
                f"{package}: {value} annotations use Any, above its budget of {allowed}; type "
                "the new parameters and returns (a Protocol, a TypeVar, a union, object) instead "
                "of Any"
            )
        elif value < allowed:
            found.append(
                f"{package}: {value} annotations use Any, below its budget of {allowed}; lower "
                f"the budget to {value} in tools/any_budget.json (python tools/any_budget.py "
                "--write) so that it stays down"
            )
    for package in sorted(set(budget) - set(current)):
        found.append(f"{package}: is in tools/any_budget.json but not a package; remove it")
    return found


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--check", action="store_true", help="Exit 1 when a count is off budget.")
    mode.add_argument("--write", action="store_true", help="Set the budget to the counts.")
    args = parser.parse_args()
    found = counts()
    current = {package: count.any for package, count in found.items()}
    if args.write:
        BUDGET.write_text(json.dumps(current, indent=2) + "\n", encoding="utf-8")
        return 0
    if args.check:
        wrong = problems(current, json.loads(BUDGET.read_text(encoding="utf-8")))
        print("\n".join(wrong), file=sys.stderr)
        return 1 if wrong else 0
    for package, count in found.items():
        share = count.parameters_any / count.parameters if count.parameters else 0.0
        print(
            f"{package:18} Any in {count.parameters_any:4} of {count.parameters:5} parameters "
            f"({share:6.1%}), {count.returns_any:4} of {count.returns:5} returns"
        )
    every = sum(c.parameters for c in found.values())
    with_any = sum(c.parameters_any for c in found.values())
    print(f"{'all':18} Any in {with_any:4} of {every:5} parameters ({with_any / every:6.1%})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

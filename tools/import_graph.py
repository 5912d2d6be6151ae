"""Draw the imports between the workspace's packages and measure each package's module floors.

Every module under ``packages/*/src`` is parsed with :mod:`ast` (nothing is imported). Each
import statement is classified by where it sits:

- ``load``: runs when its module is imported (module level, class bodies, ``try``/``if`` at
  module level);
- ``deferred``: inside a function, runs on first call (typically to dodge an import circle or
  to keep a heavy dependency lazy);
- ``typing``: under ``if TYPE_CHECKING:``, never runs.

From those it derives, per package, over imports between its own modules:

- **floors**: a module stands one floor above the highest module it imports, at load time or
  deferred (a module that imports none of its package's modules is on floor 0; modules in one
  circle of load-time and deferred imports share a floor);
- **back-up imports**: deferred imports that close such a circle (code that reaches back up
  the floors when it runs, to dodge a circle at load time); a deferred import of a module
  that does not import the importer back only keeps a dependency lazy, and stands like any
  other import;
- **circles**: groups of modules that name each other through imports of any kind (a circle
  broken only by ``TYPE_CHECKING`` or by a function-level import is still a circle of the
  design);
- the largest folder, in modules (``__init__`` included).

The generated section of ``ARCHITECTURE.md`` (between ``<!-- import-graph:start -->`` and
``<!-- import-graph:end -->``) holds a Mermaid picture of the package imports, grouped by the
layers of the import-linter contract in the root ``pyproject.toml``, and a table of those
measures. ``tests/test_architecture.py`` fails when the section is stale.

Usage:
    python tools/import_graph.py             # rewrite the section of ARCHITECTURE.md
    python tools/import_graph.py --check     # exit 1 when the committed section is stale
    python tools/import_graph.py --floors accel   # print one package's modules by floor
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    sys.exit("import_graph: run it with Python >= 3.11 (it reads pyproject.toml).")

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "packages"
DOCUMENT = ROOT / "ARCHITECTURE.md"
START = "<!-- import-graph:start -->"
END = "<!-- import-graph:end -->"
KINDS = ("load", "deferred", "typing")


@dataclass(frozen=True)
class Import:
    """One import statement of a module, resolved to the module it names."""

    source: str
    """The importing module (``accel._facade._accelerator``)."""
    target: str
    """The imported module, as precise as the sources allow (``accel_state._process._control``)."""
    kind: str
    """``load``, ``deferred`` or ``typing`` (see the module docstring)."""
    line: int
    """Line of the statement in the importing module."""


@dataclass
class Package:
    """One workspace package: its folder, import name and modules."""

    folder: str
    """Folder under ``packages/`` (``accel-state``)."""
    name: str
    """Top-level import name (``accel_state``)."""
    src: Path
    """The folder holding the import package (``packages/accel-state/src``)."""
    files: dict[str, Path] = field(default_factory=dict)
    """Dotted module name -> source file."""


def find_packages(packages: Path = PACKAGES) -> dict[str, Package]:
    """Every package of ``packages`` (each ``<folder>/src/<import name>/``), by import name."""
    found = {}
    for folder in sorted(packages.iterdir()):
        src = folder / "src"
        if not src.is_dir():
            continue
        for top in sorted(src.iterdir()):
            if not (top / "__init__.py").is_file():
                continue
            package = Package(folder.name, top.name, src)
            for path in sorted(top.rglob("*.py")):
                parts = list(path.relative_to(src).with_suffix("").parts)
                if parts[-1] == "__init__":
                    parts.pop()
                package.files[".".join(parts)] = path
            found[top.name] = package
    return found


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _statements(body: Iterable[ast.stmt], kind: str) -> Iterator[tuple[ast.stmt, str]]:
    """Every statement under ``body`` with the kind of import it would be."""
    for statement in body:
        yield statement, kind
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inner = "typing" if kind == "typing" else "deferred"
            yield from _statements(statement.body, inner)
        elif isinstance(statement, ast.If) and _is_type_checking(statement.test):
            yield from _statements(statement.body, "typing")
            yield from _statements(statement.orelse, kind)
        else:
            for name in ("body", "orelse", "finalbody", "handlers", "cases"):
                for child in getattr(statement, name, ()):
                    if isinstance(child, ast.stmt):
                        yield from _statements([child], kind)
                    elif hasattr(child, "body"):  # except handlers, match cases
                        yield from _statements(child.body, kind)


def _resolve(name: str, modules: set[str]) -> str:
    """The longest known module that ``name`` starts with (``name`` itself when none is)."""
    parts = name.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in modules:
            return candidate
    return name


def module_imports(module: str, path: Path, modules: set[str]) -> list[Import]:
    """The imports of one module, each resolved against the workspace's ``modules``."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for statement, kind in _statements(tree.body, "load"):
        targets: list[str] = []
        if isinstance(statement, ast.Import):
            targets = [_resolve(alias.name, modules) for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom):
            base = statement.module or ""
            if statement.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - statement.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in statement.names:
                child = f"{base}.{alias.name}"
                targets.append(child if child in modules else _resolve(base, modules))
        found += [Import(module, t, kind, statement.lineno) for t in dict.fromkeys(targets)]
    return found


def all_imports(packages: dict[str, Package]) -> list[Import]:
    """Every import statement of every module of ``packages``."""
    modules = {name for package in packages.values() for name in package.files}
    found = []
    for package in packages.values():
        for module, path in package.files.items():
            found += module_imports(module, path, modules)
    return found


def _top(module: str) -> str:
    return module.split(".", 1)[0]


def package_edges(imports: list[Import], names: set[str]) -> dict[tuple[str, str], Counter]:
    """(importer, imported) package -> how many import statements of each kind."""
    edges: dict[tuple[str, str], Counter] = defaultdict(Counter)
    for item in imports:
        source, target = _top(item.source), _top(item.target)
        if source != target and target in names:
            edges[source, target][item.kind] += 1
    return edges


@dataclass
class Floors:
    """The load-time structure of one package's own modules."""

    floor: dict[str, int]
    """Module -> its floor."""
    circles: list[list[str]]
    """Groups of two or more modules naming each other through imports of any kind."""
    back_up: list[Import]
    """Deferred imports of a module on a higher floor than the importer."""
    largest_folder: tuple[str, int]
    """The folder holding the most modules, and how many (``__init__`` included)."""


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = [start]
    while todo:
        for nxt in graph[todo.pop()]:
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return seen


def _graph(
    modules: list[str], imports: list[Import], kinds: tuple[str, ...]
) -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in modules}
    for item in imports:
        if item.kind in kinds and item.source in graph and item.target in graph:
            if item.source != item.target:
                graph[item.source].add(item.target)
    return graph


def _components(graph: dict[str, set[str]]) -> dict[str, frozenset[str]]:
    """Module -> the modules that reach it and that it reaches (itself included)."""
    reach = {m: _reach(graph, m) for m in graph}
    return {m: frozenset({m} | {o for o in reach[m] if m in reach[o]}) for m in graph}


def measure(package: Package, imports: list[Import]) -> Floors:
    """Floors, circles, back-up imports and the largest folder of one package."""
    modules = sorted(package.files)
    graph = _graph(modules, imports, ("load", "deferred"))
    component = _components(graph)
    floor: dict[str, int] = {}

    def floor_of(module: str) -> int:
        if module not in floor:
            below = {t for m in component[module] for t in graph[m]} - component[module]
            value = 1 + max((floor_of(t) for t in below), default=-1)
            for member in component[module]:
                floor[member] = value
        return floor[module]

    for module in modules:
        floor_of(module)
    named = _components(_graph(modules, imports, KINDS))
    circles = sorted({tuple(sorted(c)) for c in named.values() if len(c) > 1})
    back_up = list(
        {
            (item.source, item.target): item
            for item in imports
            if item.kind == "deferred"
            and item.source in floor
            and item.target in component[item.source]
        }.values()
    )
    folders = Counter(package.files[m].parent for m in modules)
    folder, count = max(folders.items(), key=lambda pair: (pair[1], str(pair[0])))
    where = folder.relative_to(package.src).as_posix()
    return Floors(floor, [list(c) for c in circles], back_up, (f"{where}/", count))


def layers() -> list[list[str]]:
    """The layers of the import-linter ``layers`` contract, top first."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    for contract in config["tool"]["importlinter"]["contracts"]:
        if contract["type"] == "layers":
            return [[n.strip() for n in layer.split("|")] for layer in contract["layers"]]
    raise SystemExit("import_graph: the root pyproject.toml declares no import-linter layers.")


def mermaid(packages: dict[str, Package], imports: list[Import]) -> list[str]:
    """A Mermaid flowchart: one box per package in its layer, one arrow per imported package.

    A dotted arrow is an import that is only deferred or only for type checkers.
    """
    edges = package_edges(imports, set(packages))
    lines = ["```mermaid", "flowchart TD"]
    placed: set[str] = set()
    stack = layers()
    for index, layer in enumerate(stack):
        lines.append(f'    subgraph L{len(stack) - 1 - index}["layer {len(stack) - 1 - index}"]')
        for name in layer:
            if name in packages:
                lines.append(f'        {name}["{packages[name].folder}"]')
                placed.add(name)
        lines.append("    end")
    for name in sorted(set(packages) - placed):
        lines.append(f'    {name}["{packages[name].folder} (in no layer)"]')
    for (source, target), kinds in sorted(edges.items()):
        arrow = "-->" if kinds["load"] else "-.->"
        lines.append(f"    {source} {arrow} {target}")
    lines.append("```")
    return lines


def _imports_cell(kinds: Counter) -> str:
    return ", ".join(k for k in KINDS if kinds[k])


def render(packages: dict[str, Package] | None = None) -> str:
    """The generated section, markers excluded."""
    packages = find_packages() if packages is None else packages
    imports = all_imports(packages)
    edges = package_edges(imports, set(packages))
    lines = [
        "<!-- Generated by tools/import_graph.py from the sources: do not edit by hand. -->",
        "",
        "Solid arrow: imported when the importer is imported. Dotted: only inside functions "
        "or for type checkers. A name re-exported through a lazy table (a module path in a "
        "string, loaded on first use) is not an import statement and draws no arrow.",
        "",
        *mermaid(packages, imports),
        "",
        "| importer | imports | kinds of import |",
        "| --- | --- | --- |",
    ]
    for (source, target), kinds in sorted(edges.items()):
        folders = (packages[source].folder, packages[target].folder)
        lines.append(f"| `{folders[0]}` | `{folders[1]}` | {_imports_cell(kinds)} |")
    lines += [
        "",
        "Inside each package, between its own modules: a module stands one floor above what "
        "it imports, at load time or inside a function; a back-up import, inside a function, "
        "closes a circle of such imports; a circle is a group of modules naming each other "
        "through imports of any kind.",
        "",
        "| package | modules | largest folder | floors | circles | back-up imports |",
        "| --- | ---: | --- | ---: | ---: | ---: |",
    ]
    details: list[str] = []
    for name, package in sorted(packages.items(), key=lambda pair: pair[1].folder):
        own = [i for i in imports if _top(i.source) == name]
        floors = measure(package, own)
        folder, count = floors.largest_folder
        lines.append(
            f"| `{package.folder}` | {len(package.files)} | `{folder}` ({count}) "
            f"| {max(floors.floor.values(), default=-1) + 1} | {len(floors.circles)} "
            f"| {len(floors.back_up)} |"
        )
        for circle in floors.circles:
            details.append(
                f"- circle in `{package.folder}`: " + ", ".join(f"`{m}`" for m in circle)
            )
        for item in floors.back_up:
            details.append(
                f"- back-up import in `{package.folder}`: `{item.source}` (floor "
                f"{floors.floor[item.source]}) imports `{item.target}` "
                f"(floor {floors.floor[item.target]})"
            )
    if details:
        lines += ["", *details]
    return "\n".join(lines) + "\n"


def expected(document: str) -> str:
    """``document`` with its generated section replaced by the current one."""
    head, found, rest = document.partition(START)
    _, found_end, tail = rest.partition(END)
    if not found or not found_end:
        raise ValueError(
            f"import_graph: {DOCUMENT.name} needs the markers {START} and {END} (in that "
            "order) around the generated section; add them where the picture belongs."
        )
    return f"{head}{START}\n{render()}{END}{tail}"


def print_floors(name: str) -> None:
    """Print one package's modules, top floor first."""
    packages = find_packages()
    if name not in packages:
        by_folder = {p.folder: p for p in packages.values()}
        if name not in by_folder:
            raise SystemExit(
                f"import_graph: no package {name!r}; the packages are {sorted(by_folder)}."
            )
        name = by_folder[name].name
    own = [i for i in all_imports(packages) if _top(i.source) == name]
    floors = measure(packages[name], own)
    by_floor: dict[int, list[str]] = defaultdict(list)
    for module, level in floors.floor.items():
        by_floor[level].append(module)
    for level in sorted(by_floor, reverse=True):
        print(f"floor {level}: " + " ".join(sorted(by_floor[level])))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="Exit 1 when the section is stale.")
    parser.add_argument("--floors", metavar="PACKAGE", help="Print one package's floors.")
    args = parser.parse_args()
    if args.floors:
        print_floors(args.floors)
        return 0
    current = DOCUMENT.read_text(encoding="utf-8")
    wanted = expected(current)
    if args.check:
        if current != wanted:
            print(f"{DOCUMENT.name} is stale; run: python tools/import_graph.py", file=sys.stderr)
            return 1
        return 0
    if current != wanted:
        DOCUMENT.write_text(wanted, encoding="utf-8")
        print(f"rewrote the import graph of {DOCUMENT.name}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Package boundaries that import-linter cannot see.

import-linter checks the layers of the repository's ARCHITECTURE.md (at its root) for ``import``
statements. Two ways around it stay invisible to it, and this test refuses both in every
package's ``src``:

- importing another package's private module or name (``accel_state._process._teardown``,
  ``from accel_bigmodel.files import _safetensors_io``): a package uses only the public names of another;
- naming another package's module in a string (``importlib.import_module("accel.x")``, a
  ``python -m accel.x`` command line) when that package is private to it or in a higher layer.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
DOTTED = re.compile(r"^(accel(?:_[a-z]+)?)((?:\.[A-Za-z_]\w*)+)$")


def _layers() -> dict[str, int]:
    """Package -> layer index (0 is the top) from the import-linter layers contract."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    contract = next(c for c in config["contracts"] if c["type"] == "layers")
    return {
        name.strip(): depth
        for depth, layer in enumerate(contract["layers"])
        for name in layer.split("|")
    }


def _sources() -> list[tuple[str, Path]]:
    found = []
    for src in sorted(PACKAGES.glob("*/src/*")):
        if src.is_dir() and (src / "__init__.py").is_file():
            found += [(src.name, path) for path in sorted(src.rglob("*.py"))]
    return found


def _names_a_module(top: str, rest: list[str]) -> bool:
    """Whether ``top.rest[0]`` is a module or subpackage of a workspace package (so the string
    is a module path, not a tag such as ``"accel.wait_for_everyone"``)."""
    for src in PACKAGES.glob(f"*/src/{top}"):
        if (src / rest[0]).is_dir() or (src / f"{rest[0]}.py").is_file():
            return True
    return False


def _private(parts: list[str]) -> bool:
    return any(p.startswith("_") and not p.startswith("__") for p in parts)


def _imported(node: ast.AST) -> list[str]:
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module, *(f"{node.module}.{alias.name}" for alias in node.names)]
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    return []


def test_no_package_imports_another_packages_private_modules() -> None:
    packages = set(_layers())
    found = []
    for own, path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            for module in _imported(node):
                top, *rest = module.split(".")
                if top in packages and top != own and _private(rest):
                    found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {module}")
    assert not found, (
        "A package may import only the public names of another package; these reach into a "
        "private module or name. Export what is needed from the owning package's __init__ "
        "(or move the code there):\n" + "\n".join(found)
    )


def test_no_package_names_a_private_or_higher_module_in_a_string() -> None:
    layers = _layers()
    found = []
    for own, path in _sources():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
                continue
            match = DOTTED.match(node.value)
            if match is None or match.group(1) not in layers or match.group(1) == own:
                continue
            top, rest = match.group(1), match.group(2).split(".")[1:]
            if not _names_a_module(top, rest):
                continue
            if _private(rest) or layers[top] < layers[own]:
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}")
    assert not found, (
        "A module name in a string is an import import-linter cannot see: it must name a "
        "public module of the same or a lower layer (the root ARCHITECTURE.md). Move the code "
        "into the package that names it, or import it normally:\n" + "\n".join(found)
    )


# Private module names that still repeat across packages, each with the reason it may for now.
# An entry must leave this list once its name is unique again.
REPEATED_PRIVATE_NAMES: dict[str, str] = {
    # The same job in both: accel_state.lazy, copied by tools/gen_reexports.py into the packages
    # that may not import accel_state (its --check fails when a copy drifts).
    "_lazy": "the shared lazy loader, generated into accel_bigmodel and accel_trackers",
}


def _private_module_names(src: Path) -> set[str]:
    """Basenames of the private modules and subpackages anywhere under a package's ``src``."""
    names = {p.stem for p in src.rglob("_*.py") if not p.name.startswith("__")}
    names |= {p.name for p in src.rglob("_*") if p.is_dir() and not p.name.startswith("__")}
    return names


def test_no_private_module_name_repeats_across_packages() -> None:
    owners: dict[str, list[str]] = {}
    for src in sorted(PACKAGES.glob("*/src/*")):
        if src.is_dir() and (src / "__init__.py").is_file():
            for name in _private_module_names(src):
                owners.setdefault(name, []).append(src.name)
    repeated = {name: pkgs for name, pkgs in owners.items() if len(pkgs) > 1}
    found = [
        f"{name}: {', '.join(pkgs)}"
        for name, pkgs in sorted(repeated.items())
        if name not in REPEATED_PRIVATE_NAMES
    ]
    assert not found, (
        "A private module name says its job, so it is unique across the packages; these names "
        "repeat with different jobs. Rename the lower package's module after what it does "
        "(git mv, then update its imports and string paths):\n" + "\n".join(found)
    )
    stale = sorted(set(REPEATED_PRIVATE_NAMES) - set(repeated))
    assert not stale, (
        f"REPEATED_PRIVATE_NAMES allows {stale}, which no longer repeat across packages; remove "
        "them from the list so that they stay unique."
    )


MAX_SOURCE_LINES = 600
# The one file allowed past it, with its cap: the class a reader opens to find every method;
# its bodies are delegations (the logic lives in the modules of its folder).
LONG_SOURCES = {"packages/accel/src/accel/_facade/_accelerator.py": 1250}


def test_no_source_file_exceeds_600_lines() -> None:
    found = []
    for _, path in _sources():
        length = len(path.read_text().splitlines())
        if length > LONG_SOURCES.get(path.relative_to(ROOT).as_posix(), MAX_SOURCE_LINES):
            found.append(f"{path.relative_to(ROOT)}: {length} lines")
    assert not found, (
        f"A source file holds at most {MAX_SOURCE_LINES} lines (the root ARCHITECTURE.md); these "
        "are longer. Split each by job: move one job (a group of functions or classes that work "
        "together) into a sibling private module named after it, and import it back:\n"
        + "\n".join(found)
    )


HINT = re.compile(r"pip install [\"']?([A-Za-z0-9_.-]+)\[([a-z0-9_,-]+)\]")


def _extras(pyproject: Path) -> tuple[str, set[str]]:
    project = tomllib.loads(pyproject.read_text())["project"]
    return project["name"], set(project.get("optional-dependencies", {}))


def test_install_hints_name_the_package_that_owns_the_extra() -> None:
    """``pip install "pkg[extra]"`` in a message: pkg declares that extra, and a package that
    declares the extra itself names itself (installing it alone must be enough)."""
    declared = dict(_extras(p) for p in sorted(PACKAGES.glob("*/pyproject.toml")))
    found = []
    for pyproject in sorted(PACKAGES.glob("*/pyproject.toml")):
        own_name, own_extras = _extras(pyproject)
        for path in sorted((pyproject.parent / "src").rglob("*.py")):
            for number, line in enumerate(path.read_text().splitlines(), 1):
                for dist, extras in HINT.findall(line):
                    where = f"{path.relative_to(ROOT)}:{number}: {dist}[{extras}]"
                    if not dist.startswith("accel"):
                        continue  # another project's extra (transformer-engine[pytorch])
                    for extra in extras.split(","):
                        if extra not in declared.get(dist, set()):
                            found.append(f"{where}: {dist} declares no extra {extra!r}")
                        elif extra in own_extras and dist != own_name:
                            found.append(f"{where}: {own_name} declares {extra!r} itself")
    assert not found, "Install hints must name the package that owns the extra:\n" + "\n".join(
        found
    )

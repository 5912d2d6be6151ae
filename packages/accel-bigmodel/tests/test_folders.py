"""The package's folders by job: few modules each, and imports that only go down the order."""

from __future__ import annotations

import ast
from pathlib import Path

import accel_bigmodel

PACKAGE = Path(accel_bigmodel.__file__).parent

FOLDERS = ["placement", "files", "offload", "hooks", "loading", "estimate"]
"""Lowest first: a folder's modules import only from the folders before it (and their own)."""

TOP_MODULES = {"__init__.py", "_lazy.py", "_bigmodel_variables.py"}
"""The modules every folder may use, kept at the package top."""


def _imported_folders(path: Path) -> set[str]:
    """The package folders a module imports from, at load time or inside a function."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level == 2 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "accel_bigmodel" and len(parts) > 1:
                found.add(parts[1])
    return found & set(FOLDERS)


def test_the_package_top_keeps_only_the_shared_modules() -> None:
    top = {path.name for path in PACKAGE.glob("*.py")}
    assert top == TOP_MODULES, (
        f"accel_bigmodel/ holds {sorted(top - TOP_MODULES)} besides {sorted(TOP_MODULES)}: "
        f"put each module in the folder of its job ({', '.join(FOLDERS)})"
    )
    folders = {path.parent.name for path in PACKAGE.glob("*/__init__.py")}
    assert folders == set(FOLDERS), f"folders {sorted(folders)}, expected {sorted(FOLDERS)}"


def test_each_folder_holds_at_most_12_modules() -> None:
    crowded = {
        folder: count
        for folder in FOLDERS
        if (count := len([p for p in (PACKAGE / folder).glob("*.py") if p.name != "__init__.py"]))
        > 12
    }
    assert not crowded, f"folders over 12 modules: {crowded}; split them by job"


def test_folders_import_only_the_folders_below_them() -> None:
    rank = {folder: i for i, folder in enumerate(FOLDERS)}
    upward = [
        f"{folder}/{path.name} imports {target}/"
        for folder in FOLDERS
        for path in sorted((PACKAGE / folder).glob("*.py"))
        for target in sorted(_imported_folders(path))
        if rank[target] > rank[folder]
    ]
    assert not upward, (
        f"the folders import downwards only ({' > '.join(reversed(FOLDERS))}); these go up: "
        f"{upward}. Move what they need into the lower folder."
    )

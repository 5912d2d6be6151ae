"""The ``accelerate`` names that transformers, PEFT, TRL and diffusers use, read from their
installed sources (``ast``): ``from accelerate.<path> import name``, ``import accelerate.<path>``
and attribute chains reached from such an import (``import accelerate`` then
``accelerate.big_modeling.check_device_map``, ``import accelerate.utils as au`` then
``au.set_seed``). A chain is split where its module path ends: the first segment that is not a
submodule of accel (the switch maps ``accelerate.<path>`` to ``accel.<path>``) is the name.

Shared by ``test_static_reach.py`` (every name resolves) and ``test_argument_probe.py`` (every
name has a differential case); no test here.
"""

from __future__ import annotations

import ast
import importlib.util
from functools import cache
from pathlib import Path

CLIENTS = ("transformers", "peft", "trl", "diffusers")

Uses = dict[tuple[str, str | None], set[str]]
"""(module, name or None for the module itself) -> the files that use it."""


def _is_accelerate(module: str) -> bool:
    return module == "accelerate" or module.startswith("accelerate.")


@cache
def is_module(path: str) -> bool:
    """Whether ``accelerate.<path>`` names a module (decided on accel's side of the switch)."""
    ours = "accel" + path[len("accelerate") :]
    try:
        return importlib.util.find_spec(ours) is not None
    except (ImportError, ValueError):
        return False


def _chain(node: ast.Attribute) -> list[str] | None:
    """``a.b.c`` as ``["a", "b", "c"]``; None when the chain does not start at a plain name."""
    parts: list[str] = []
    current: ast.expr = node
    while isinstance(current, ast.Attribute):
        parts.append(current.attr)
        current = current.value
    if not isinstance(current, ast.Name):
        return None
    parts.append(current.id)
    return parts[::-1]


def split(path: str, attributes: list[str]) -> tuple[str, str | None]:
    """``accelerate.<path>`` followed by attributes, as (module, first non-module attribute)."""
    module = path
    for attribute in attributes:
        if is_module(f"{module}.{attribute}"):
            module = f"{module}.{attribute}"
        else:
            return module, attribute
    return module, None


def uses_in_source(source: str, where: str, found: Uses | None = None) -> Uses:
    """Every use of an ``accelerate`` name in one file's source (see the module docstring)."""
    found = {} if found is None else found
    tree = ast.parse(source, filename=where)
    bound: dict[str, str] = {}  # local name -> the accelerate module it is bound to
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if _is_accelerate(node.module):
                for alias in node.names:
                    found.setdefault((node.module, alias.name), set()).add(where)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if _is_accelerate(alias.name):
                    found.setdefault((alias.name, None), set()).add(where)
                    if alias.asname:
                        bound[alias.asname] = alias.name
                    else:  # ``import accelerate.x`` binds ``accelerate``
                        bound["accelerate"] = "accelerate"
    if not bound:
        return found
    inner: set[int] = set()  # the value of a longer chain is not a use of its own
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and id(node) not in inner:
            inner.add(id(node.value))
            parts = _chain(node)
            if parts is None or parts[0] not in bound:
                continue
            found.setdefault(split(bound[parts[0]], parts[1:]), set()).add(where)
    return found


def client_uses(package: str) -> Uses:
    """Every use of an ``accelerate`` name in an installed package's sources."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    root = Path(next(iter(spec.submodule_search_locations)))
    found: Uses = {}
    for path in sorted(root.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if "accelerate" in source:  # no use without the word: skip parsing
            uses_in_source(source, f"{package}/{path.relative_to(root)}", found)
    return found


def installed_clients() -> tuple[str, ...]:
    return tuple(c for c in CLIENTS if importlib.util.find_spec(c) is not None)


def all_uses() -> Uses:
    """The union over the installed clients."""
    found: Uses = {}
    for client in installed_clients():
        for key, files in client_uses(client).items():
            found.setdefault(key, set()).update(files)
    return found

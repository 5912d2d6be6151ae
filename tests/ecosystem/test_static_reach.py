"""Every name that transformers, PEFT, TRL and diffusers import from ``accelerate`` resolves
under accel (``accelerate.<path>.<name>`` is ``accel.<path>.<name>`` under
``install_as_accelerate()``).

The clients' installed sources are parsed (``ast``), so a new release of a client that imports a
new name fails here at once, naming it. Each client is skipped, with the reason, when it is not
installed (``uv sync --group ecosystem``, Python 3.11+).
"""

from __future__ import annotations

import ast
import importlib
import importlib.util
from pathlib import Path

import pytest

CLIENTS = ("transformers", "peft", "trl", "diffusers")

Imported = dict[tuple[str, str | None], set[str]]
"""(module, name or None for ``import module``) -> the files that import it."""


def accelerate_imports(package: str) -> Imported:
    """Every absolute import of ``accelerate`` or ``accelerate.<path>`` in a package's sources."""
    spec = importlib.util.find_spec(package)
    assert spec is not None and spec.submodule_search_locations, package
    root = Path(next(iter(spec.submodule_search_locations)))
    found: Imported = {}
    for path in sorted(root.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        where = f"{package}/{path.relative_to(root)}"
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                if node.module == "accelerate" or node.module.startswith("accelerate."):
                    for alias in node.names:
                        found.setdefault((node.module, alias.name), set()).add(where)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.name == "accelerate" or alias.name.startswith("accelerate."):
                        found.setdefault((alias.name, None), set()).add(where)
    return found


def unresolved(module: str, name: str | None) -> str | None:
    """Why ``from module import name`` (or ``import module``) fails under accel, or None."""
    ours = "accel" + module[len("accelerate") :]
    try:
        target = importlib.import_module(ours)
    except ImportError as err:
        return f"{ours} does not import ({err})"
    if name is None or name == "*":
        return None
    try:
        getattr(target, name)
    except AttributeError:
        try:
            importlib.import_module(f"{ours}.{name}")
        except ImportError:
            return f"{ours} has no {name!r}"
    except ImportError as err:
        return f"{ours}.{name} fails to load ({err})"
    return None


@pytest.mark.parametrize("client", CLIENTS)
def test_every_accelerate_import_of_the_client_resolves_under_accel(client: str) -> None:
    if importlib.util.find_spec(client) is None:
        pytest.skip(f"{client} is not installed (uv sync --group ecosystem, Python 3.11+)")
    imports = accelerate_imports(client)
    assert imports, f"found no accelerate import in {client}: the scan is broken"
    problems = []
    for (module, name), files in sorted(imports.items(), key=lambda item: str(item[0])):
        why = unresolved(module, name)
        if why is not None:
            what = module if name is None else f"from {module} import {name}"
            problems.append(f"{what}: {why} (imported by {', '.join(sorted(files)[:3])})")
    assert not problems, f"{len(problems)} imports of {client} do not resolve under accel:\n" + (
        "\n".join(problems)
    )


def test_the_scan_names_a_missing_name() -> None:
    assert unresolved("accelerate.utils", "no_such_name") == "accel.utils has no 'no_such_name'"
    assert "does not import" in str(unresolved("accelerate.no_such_module", "x"))
    assert unresolved("accelerate.parallelism_config", "ParallelismConfig") is None

"""ARCHITECTURE.md stays true: its import picture is regenerated from the sources, and it
documents every package of the workspace.

The measures themselves (floors, circles, back-up imports) are checked on a small package
written for the test, so a change of ``tools/import_graph.py`` that miscounts fails here too.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
DOCUMENT = ROOT / "ARCHITECTURE.md"


def _tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "import_graph", ROOT / "tools" / "import_graph.py"
    )
    assert spec is not None and spec.loader is not None
    tool = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = tool  # dataclasses resolve their module by name
    spec.loader.exec_module(tool)
    return tool


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    return _tool()


def test_the_import_picture_is_current(tool: ModuleType) -> None:
    document = DOCUMENT.read_text(encoding="utf-8")
    assert document == tool.expected(document), (
        "The generated section of ARCHITECTURE.md is stale (an import or a module changed); "
        "run: uv run --no-sync python tools/import_graph.py"
    )


def test_every_package_is_documented_in_its_layer() -> None:
    """A package added to ``packages/`` (or to the import-linter layers) needs its row."""
    document = DOCUMENT.read_text(encoding="utf-8")
    table = document.split("## Packages and layers", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in table.splitlines():
        match = re.match(r"\| (\d) \| `([\w-]+)`", line)
        if match:
            rows[match.group(2)] = int(match.group(1))
    folders = sorted(p.name for p in (ROOT / "packages").iterdir() if p.is_dir())
    assert sorted(rows) == folders, (
        "ARCHITECTURE.md's table of packages and layers must have one row per folder of "
        f"packages/; rows: {sorted(rows)}, folders: {folders}. Add or remove the row."
    )
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contract = next(c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers")
    enforced = {}
    for depth, layer in enumerate(contract["layers"]):
        for name in layer.split("|"):
            enforced[name.strip()] = len(contract["layers"]) - 1 - depth
    documented = {folder.replace("-", "_"): layer for folder, layer in rows.items()}
    assert documented == enforced, (
        "ARCHITECTURE.md's layers must be the import-linter layers of pyproject.toml; "
        f"documented: {documented}, enforced: {enforced}. Make the two agree."
    )


def _write(root: Path, files: dict[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def test_floors_circles_and_back_up_imports(tool: ModuleType, tmp_path: Path) -> None:
    src = tmp_path / "demo" / "src"
    _write(
        src / "demo",
        {
            "__init__.py": "",
            "base.py": "import os\n",
            "mid.py": "from . import base\n",
            # top imports mid at load time; inside a function it reaches nothing higher
            "top.py": "from .mid import x\n\ndef f():\n    from . import base\n",
            # low imports top only inside a function, to stay lazy: it stands above top
            "low.py": "def g():\n    from .top import f\n",
            # up imports down at load time, and down reaches back up inside a function to
            # dodge the circle: a back-up import
            "up.py": "from .down import d\n",
            "down.py": "def d():\n    from .up import u\n",
            # a circle broken only by TYPE_CHECKING is still a circle
            "left.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .right import R\n",
            "right.py": "from .left import L\n",
            "sub/__init__.py": "",
            "sub/deep.py": "from ..top import f\nfrom demo.sub import other\n",
            "sub/other.py": "",
        },
    )
    package = tool.find_packages(tmp_path)["demo"]
    assert package.folder == "demo"
    assert sorted(package.files) == [
        "demo",
        "demo.base",
        "demo.down",
        "demo.left",
        "demo.low",
        "demo.mid",
        "demo.right",
        "demo.sub",
        "demo.sub.deep",
        "demo.sub.other",
        "demo.top",
        "demo.up",
    ]
    imports = tool.all_imports({"demo": package})
    kinds = {(i.source, i.target): i.kind for i in imports}
    assert kinds["demo.top", "demo.mid"] == "load"
    assert kinds["demo.top", "demo.base"] == "deferred"
    assert kinds["demo.left", "demo.right"] == "typing"
    assert kinds["demo.sub.deep", "demo.sub.other"] == "load"
    measured = tool.measure(package, imports)
    assert measured.floor["demo.base"] == 0
    assert measured.floor["demo.mid"] == 1
    assert measured.floor["demo.top"] == 2
    assert measured.floor["demo.sub.deep"] == 3
    assert measured.floor["demo.low"] == 3
    assert measured.floor["demo.up"] == measured.floor["demo.down"] == 0
    assert [(i.source, i.target) for i in measured.back_up] == [("demo.down", "demo.up")]
    assert measured.circles == [["demo.down", "demo.up"], ["demo.left", "demo.right"]]
    assert measured.largest_folder == ("demo/", 9)


def test_a_document_without_markers_is_refused(tool: ModuleType) -> None:
    with pytest.raises(ValueError, match="import-graph:start"):
        tool.expected("# a page with no generated section\n")


def test_the_type_stubs_of_the_lazy_namespaces_are_current() -> None:
    """Each lazy namespace's ``.pyi`` stub is generated from its ``_EXPORTS`` table."""
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "gen_reexports.py"), "--check"],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr + done.stdout


# The one module allowed past 500 lines, with its cap: the class a reader opens to find every
# method; its bodies are delegations (the logic lives in the modules of its folder).
LONG_MODULES = {"packages/accel/src/accel/_facade/_accelerator.py": 1250}


SHIM_MARK = "# Generated by tools/gen_reexports.py"
"""The first line of a generated shim module (a module at a reference path, a copy of
``accel_state/lazy.py``): it holds no job of its own, so a folder's count leaves it out."""


def _modules_of(folder: Path) -> list[Path]:
    """The modules a reader of ``folder`` looks through: not ``__init__.py``, not shims."""
    return [
        path
        for path in sorted(folder.glob("*.py"))
        if path.name != "__init__.py" and not path.read_text(encoding="utf-8").startswith(SHIM_MARK)
    ]


def test_no_module_is_over_500_lines_and_no_folder_over_12_modules() -> None:
    """A module holds one job (500 lines at most); a folder of a package shows its job by
    holding few enough modules to read at a glance (12 at most, not counting ``__init__.py``
    and generated shims)."""
    long = []
    crowded = []
    for src in sorted(ROOT.glob("packages/*/src")):
        for path in sorted(src.rglob("*.py")):
            lines = len(path.read_text(encoding="utf-8").splitlines())
            if lines > LONG_MODULES.get(path.relative_to(ROOT).as_posix(), 500):
                long.append(f"{path.relative_to(ROOT)}: {lines} lines")
        folders = {path.parent for path in src.rglob("*.py")}
        for folder in sorted(folders):
            name = folder.relative_to(ROOT).as_posix()
            count = len(_modules_of(folder))
            if count > 12:
                crowded.append(f"{name}: {count} modules")
    for path in sorted(ROOT.glob("benchmarks/**/*.py")) + sorted(ROOT.glob("tools/**/*.py")):
        lines = len(path.read_text(encoding="utf-8").splitlines())
        if lines > 500:
            long.append(f"{path.relative_to(ROOT)}: {lines} lines")
    assert not long, "split these modules by job (500 lines at most):\n" + "\n".join(long)
    assert not crowded, (
        "a folder holds at most 12 modules (not counting __init__.py and generated shims); "
        "group these into subpackages by job:\n" + "\n".join(crowded)
    )


FACADE_FOLDERS = [
    "_core",
    "_engines",
    "_engines.fsdp",
    "_engines.deepspeed",
    "_engines.megatron",
    "_training_checkpoints.files",
    "_training_checkpoints.save",
    "_training_checkpoints.load",
    "_training_checkpoints",
    "_facade",
]
"""The facade's folders and their subfolders, lowest first: a folder imports only the folders
below it. A module belongs to the deepest folder that holds it; a folder's ``__init__`` may
import its own subfolders (it is their entry: ``_engines`` picks the engine of a run)."""


def test_the_facade_folders_import_only_downwards(tool: ModuleType) -> None:
    packages = tool.find_packages()
    rank = {f"accel.{folder}": i for i, folder in enumerate(FACADE_FOLDERS)}

    def folder_of(module: str) -> str | None:
        holding = [f for f in rank if module == f or module.startswith(f + ".")]
        return max(holding, key=len, default=None)

    back_up = set()
    for item in tool.all_imports({"accel": packages["accel"]}):
        source, target = folder_of(item.source), folder_of(item.target)
        if item.source in rank and item.target.startswith(item.source + "."):
            continue  # a folder's __init__ gathering its subfolders
        if source and target and rank[target] > rank[source]:
            back_up.add((item.source, item.target))
    assert not back_up, (
        f"the facade's folders import downwards only ({' > '.join(reversed(FACADE_FOLDERS))}); "
        f"these imports go back up: {sorted(back_up)}. Move the object they need into the lower "
        "folder (or into _core, below all of them)."
    )


SAVE_TRACE_RETURNS = 44
"""The returns of one ``save_state`` (``tools/save_trace.py``) today; the bound only falls.
The per-file loops and process-state queries of the save path make most of them."""
SAVE_TRACE_NEW_RETURNS = 5
"""The returns by a call not made before (a reader following each call once); at most 5."""


def test_following_one_save_state_turns_back_at_most_the_bound() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "tools" / "save_trace.py"), "--json"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env={**os.environ, "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    trace = json.loads(done.stdout.splitlines()[-1])
    assert trace["places"] >= 5, trace  # the path was traced at all
    assert trace["returns"] <= SAVE_TRACE_RETURNS, (
        f"one save_state now turns back to a module it left {trace['returns']} times (bound "
        f"{SAVE_TRACE_RETURNS}); its path: {trace['path']}. Keep each stage's calls within "
        "its stage, or run tools/save_trace.py to see where the path goes back."
    )
    assert trace["new_returns"] <= SAVE_TRACE_NEW_RETURNS, (
        f"a reader following one save_state once per call now turns back "
        f"{trace['new_returns']} times (bound {SAVE_TRACE_NEW_RETURNS}); its path: "
        f"{trace['path']}. Call a shared module from the stage that already uses it, or run "
        "tools/save_trace.py to see where the path goes back."
    )

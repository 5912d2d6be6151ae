"""What the docs tests share: the repository root and loading a script of the repository
(``tools/``, ``benchmarks/``) as a module, since those folders are not packages."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def load_module(relative_path: str) -> ModuleType:
    """Import the file ``ROOT / relative_path`` under its stem as module name."""
    path = ROOT / relative_path
    spec = importlib.util.spec_from_file_location(path.stem, path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module

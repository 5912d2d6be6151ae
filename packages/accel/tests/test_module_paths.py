"""The reference library's module paths, checked against accel name by name.

For every module path of the reference (``accelerate.utils.modeling`` ...), each public name
must exist at accel's path (``accel.utils.modeling``) with a compatible signature (same
parameter names in the same order, the same defaults; extra keyword-only parameters are
allowed), or be listed with a reason in ``docs/migration/unsupported.md``. A listed name that
becomes supported must leave the list, so the gap can only shrink.

Skipped, with the reason, when the reference library is not installed (``uv sync --group
bench``).
"""

from __future__ import annotations

import enum
import importlib
import inspect
import re
import types
from pathlib import Path
from typing import Any

import pytest

UNSUPPORTED_FILE = Path(__file__).parents[3] / "docs" / "migration" / "unsupported.md"

# accel's path -> the reference's path.
REFERENCE_PATHS = {
    "accel": "accelerate",
    "accel.utils": "accelerate.utils",
    "accel.state": "accelerate.state",
    "accel.data_loader": "accelerate.data_loader",
    "accel.big_modeling": "accelerate.big_modeling",
    "accel.logging": "accelerate.logging",
    "accel.launchers": "accelerate.launchers",
    "accel.local_sgd": "accelerate.local_sgd",
    "accel.tracking": "accelerate.tracking",
    "accel.optimizer": "accelerate.optimizer",
    "accel.parallelism_config": "accelerate.parallelism_config",
    "accel.scheduler": "accelerate.scheduler",
    "accel.checkpointing": "accelerate.checkpointing",
    "accel.hooks": "accelerate.hooks",
    "accel.inference": "accelerate.inference",
    "accel.accelerator": "accelerate.accelerator",
    "accel.test_utils": "accelerate.test_utils",
    "accel.test_utils.testing": "accelerate.test_utils.testing",
    "accel.test_utils.training": "accelerate.test_utils.training",
    "accel.test_utils.examples": "accelerate.test_utils.examples",
    "accel.utils.ao": "accelerate.utils.ao",
    "accel.utils.bnb": "accelerate.utils.bnb",
    "accel.utils.constants": "accelerate.utils.constants",
    "accel.utils.dataclasses": "accelerate.utils.dataclasses",
    "accel.utils.deepspeed": "accelerate.utils.deepspeed",
    "accel.utils.environment": "accelerate.utils.environment",
    "accel.utils.fsdp_utils": "accelerate.utils.fsdp_utils",
    "accel.utils.imports": "accelerate.utils.imports",
    "accel.utils.launch": "accelerate.utils.launch",
    "accel.utils.megatron_lm": "accelerate.utils.megatron_lm",
    "accel.utils.memory": "accelerate.utils.memory",
    "accel.utils.modeling": "accelerate.utils.modeling",
    "accel.utils.offload": "accelerate.utils.offload",
    "accel.utils.operations": "accelerate.utils.operations",
    "accel.utils.other": "accelerate.utils.other",
    "accel.utils.random": "accelerate.utils.random",
    "accel.utils.tqdm": "accelerate.utils.tqdm",
    "accel.utils.transformer_engine": "accelerate.utils.transformer_engine",
    "accel.utils.versions": "accelerate.utils.versions",
}

_CONSTANT_TYPES = (str, int, float, bool, tuple, list, dict, set, frozenset)


def reference_names(module: types.ModuleType) -> dict[str, Any]:
    """The public names of a reference module: its own classes and functions (defined anywhere
    in the reference library) and its upper-case constants."""
    names = {}
    for name, value in vars(module).items():
        if name.startswith("_") or isinstance(value, types.ModuleType) or name == "TYPE_CHECKING":
            continue
        if inspect.isclass(value) or callable(value):
            if str(getattr(value, "__module__", "")).startswith("accelerate"):
                names[name] = value
        elif isinstance(value, _CONSTANT_TYPES) and name.isupper():
            names[name] = value
    return names


def _same(a: Any, b: Any) -> bool:
    if a is b or (type(a) is object and type(b) is object):  # two "not given" sentinels
        return True
    if isinstance(a, dict) and isinstance(b, dict):  # e.g. name -> class maps
        return a.keys() == b.keys() and all(_same(a[key], b[key]) for key in a)
    if isinstance(a, enum.Enum) or isinstance(b, enum.Enum):
        return str(getattr(a, "value", a)) == str(getattr(b, "value", b))
    try:
        if bool(a == b):
            return True
    except Exception:
        pass
    if callable(a) and callable(b):
        return getattr(a, "__name__", a) == getattr(b, "__name__", b)
    return repr(a) == repr(b)


_POSITIONAL = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)


def _signature_problem(reference: Any, ours: Any) -> str | None:
    try:
        ref_sig, our_sig = inspect.signature(reference), inspect.signature(ours)
    except (TypeError, ValueError):
        return None
    ref_params = list(ref_sig.parameters.values())
    our_params = [
        p
        for p in our_sig.parameters.values()
        if p.kind is not inspect.Parameter.KEYWORD_ONLY
        or p.name in ref_sig.parameters
        or p.default is inspect.Parameter.empty
    ]
    ref_names = [p.name if p.kind not in _VAR else p.kind.name for p in ref_params]
    our_names = [p.name if p.kind not in _VAR else p.kind.name for p in our_params]
    if ref_names != our_names:
        return f"parameters {our_names} differ from the reference's {ref_names}"
    for ref, our in zip(ref_params, our_params):
        if ref.kind in _POSITIONAL and our.kind not in _POSITIONAL:
            return f"parameter {ref.name!r} is keyword-only here, positional in the reference"
        if ref.default is not inspect.Parameter.empty and not _same(ref.default, our.default):
            return f"default of {ref.name!r} is {our.default!r}, the reference's {ref.default!r}"
    return None


_VAR = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)


def incompatibility(reference: Any, ours: Any) -> str | None:
    """Why ``ours`` cannot stand in for ``reference``, or None when it can."""
    if inspect.isclass(reference) and issubclass(reference, enum.Enum):
        if not (inspect.isclass(ours) and issubclass(ours, enum.Enum)):
            return "not an enum here"
        missing = sorted(set(reference.__members__) - set(ours.__members__))
        return f"missing members {missing}" if missing else None
    if not callable(reference):
        return None if _same(reference, ours) else f"value {ours!r}, the reference's {reference!r}"
    if not callable(ours):
        return "not callable here"
    return _signature_problem(reference, ours)


def read_unsupported(path: Path = UNSUPPORTED_FILE) -> dict[str, dict[str, str]]:
    """The ``| module | name | reason |`` rows of the unsupported-names table."""
    table: dict[str, dict[str, str]] = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) != 3 or not cells[0].startswith("`accel"):
            continue
        module, name, reason = (cell.strip("`") for cell in cells)
        table.setdefault(module, {})[name] = reason
    return table


def check_path(path: str) -> list[str]:
    """Every problem of one module path: unlisted gaps and stale entries."""
    reference = importlib.import_module(REFERENCE_PATHS[path])
    listed = read_unsupported().get(path, {})
    try:
        ours: types.ModuleType | None = importlib.import_module(path)
    except ModuleNotFoundError:
        ours = None
    names = reference_names(reference)
    if ours is None:
        return [] if "*" in listed else [f"{path} does not exist and is not listed as '*'"]
    problems = []
    for name, value in sorted(names.items()):
        try:
            problem = None if hasattr(ours, name) else "missing"
            if problem is None:
                problem = incompatibility(value, getattr(ours, name))
        except ImportError as err:
            problem = f"fails to load: {err}"
        if problem is not None and name not in listed:
            problems.append(f"{path}.{name}: {problem} (and not listed)")
        elif problem is None and name in listed:
            problems.append(
                f"{path}.{name} is supported now: remove it from {UNSUPPORTED_FILE.name}"
            )
    problems += [
        f"{path}.{name} is listed but is not a reference name: remove it"
        for name in listed
        if name not in names and name != "*"
    ]
    return problems


def _reference_available() -> bool:
    try:
        importlib.import_module("accelerate")
    except ImportError:
        return False
    return True


needs_reference = pytest.mark.skipif(
    not _reference_available(),
    reason="the reference library is not installed (uv sync --all-packages --group bench)",
)


@needs_reference
@pytest.mark.filterwarnings("ignore")
@pytest.mark.parametrize("path", sorted(REFERENCE_PATHS))
def test_reference_names_exist_or_are_listed(path: str) -> None:
    problems = check_path(path)
    assert not problems, "\n".join(problems)


def test_unsupported_table_rows_are_well_formed() -> None:
    table = read_unsupported()
    assert set(table) <= set(REFERENCE_PATHS), sorted(set(table) - set(REFERENCE_PATHS))
    for module, rows in table.items():
        for name, reason in rows.items():
            assert re.fullmatch(r"\*|[A-Za-z_][A-Za-z0-9_]*", name), (module, name)
            assert len(reason) > 10, (module, name, reason)

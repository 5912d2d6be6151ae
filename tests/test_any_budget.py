"""The number of ``Any`` annotations per package only falls (``tools/any_budget.py``)."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location("any_budget", ROOT / "tools" / "any_budget.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # the dataclass resolves its module by name
    spec.loader.exec_module(module)
    return module


def test_no_package_is_off_its_any_budget(tool: ModuleType) -> None:
    """Above the budget: type the new annotations; below it: lower the budget."""
    current = {package: count.any for package, count in tool.counts().items()}
    budget = json.loads(tool.BUDGET.read_text(encoding="utf-8"))
    wrong = tool.problems(current, budget)
    assert not wrong, "\n".join(wrong)


def test_each_annotation_with_any_counts_once(tool: ModuleType) -> None:
    source = """
from typing import Any
import typing

def f(a: Any, b: dict[str, Any], c: int, *args: Any, d: "list[Any]", **kw: typing.Any) -> Any:
    def inner(x) -> int: ...

class C:
    async def m(self, y: object) -> dict[str, Any]: ...
"""
    count = tool.count_source(source)
    assert (count.parameters, count.parameters_any) == (7, 5)
    assert (count.returns, count.returns_any) == (3, 2)


def test_a_rise_fails_and_a_fall_asks_to_lower_the_budget(tool: ModuleType) -> None:
    assert tool.problems({"p": 3}, {"p": 3}) == []
    (rise,) = tool.problems({"p": 4}, {"p": 3})
    assert "4 annotations use Any, above its budget of 3" in rise
    (fall,) = tool.problems({"p": 2}, {"p": 3})
    assert "lower the budget to 2" in fall
    (missing,) = tool.problems({"q": 1}, {})
    assert "has no budget" in missing

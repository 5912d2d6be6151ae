"""Docstrings cross-reference in the docs site's own syntax, never with Sphinx roles.

mkdocstrings renders Markdown, where ``:meth:`prepare``` prints literally; a docstring links
with ``[`prepare`][accel.Accelerator.prepare]`` (autorefs resolves it, and ``mkdocs build
--strict`` fails on a link to nothing). ``tools/roles_to_links.py`` rewrites roles.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "roles_to_links", ROOT / "tools" / "roles_to_links.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_no_source_holds_a_sphinx_role(tool: ModuleType) -> None:
    found = tool.left(tool.sources())
    assert not found, (
        "Sphinx roles print literally on the docs site; write [`name`][package.name] (or "
        "`name`), or run python tools/roles_to_links.py:\n" + "\n".join(found)
    )


def test_roles_become_links_to_documented_targets_or_code(tool: ModuleType) -> None:
    source = '''
class AlignDevicesHook:
    def fetch(self):
        """See :meth:`init_hook`, :func:`~accel_data.skip_first_batches` and
        :class:`Unknown`."""
'''
    documented = {"accel_bigmodel.AlignDevicesHook.init_hook", "accel_data.skip_first_batches"}
    out = tool.convert(source, "accel_bigmodel", documented.__contains__)
    assert "[`init_hook`][accel_bigmodel.AlignDevicesHook.init_hook]" in out
    assert "[`skip_first_batches`][accel_data.skip_first_batches]" in out
    assert "`Unknown`." in out
    assert not tool.left_in(out)


def test_the_role_pattern_sees_every_form(tool: ModuleType) -> None:
    for role in (":meth:`prepare`", ":class:<code>A</code>", ":class:A", ":py:func:&#96;g&#96;"):
        assert tool.left_in(role), role
    assert not tool.left_in("see https://example.org: a note, 12:30: done")

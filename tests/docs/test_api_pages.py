"""The generated API pages document what a class gets from base classes no page shows, and
nothing more; the Accelerator has none (its members are its own)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import load_module

hooks = load_module("tools/mkdocs_hooks.py")


def _options(package: str, name: str) -> str:
    text = "\n".join(hooks._entries(package, [name]))
    return text.split(f"::: {package}.{name}", 1)[1]


def test_the_accelerator_entry_documents_its_own_members():
    import accel

    # one class with no base of its own package: every member is in its body, shown as is
    assert hooks._hidden_bases(accel, accel.Accelerator) == []
    assert "inherited_members" not in _options("accel", "Accelerator")
    assert "show_bases" not in _options("accel", "Accelerator")


def test_a_class_whose_bases_are_documented_or_foreign_keeps_its_own_members():
    import accel_state

    # ProjectConfiguration has no base of its own package; KwargsHandler subclasses have a
    # base that accel_state exports (documented on the same page).
    assert hooks._hidden_bases(accel_state, accel_state.ProjectConfiguration) == []
    assert hooks._hidden_bases(accel_state, accel_state.AutocastKwargs) == []
    assert "inherited_members" not in _options("accel_state", "AutocastKwargs")
    assert "show_bases" not in _options("accel_state", "AutocastKwargs")
    assert hooks._hidden_bases(accel_state, accel_state.set_seed) == []

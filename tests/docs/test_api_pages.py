"""The generated API pages document what a class gets from base classes no page shows (the
Accelerator's method groups: ``prepare``, ``backward`` ...), and nothing more."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import load_module

hooks = load_module("tools/mkdocs_hooks.py")


def _options(package: str, name: str) -> str:
    text = "\n".join(hooks._entries(package, [name]))
    return text.split(f"::: {package}.{name}", 1)[1]


def test_the_accelerator_entry_shows_its_method_groups():
    import accel

    hidden = {base.__name__ for base in hooks._hidden_bases(accel, accel.Accelerator)}
    assert {"PrepareMixin", "TrainingMixin", "OpsMixin", "TrackingMixin"} <= hidden
    assert "inherited_members: true" in _options("accel", "Accelerator")
    # the method groups are internal: the page does not list them as bases
    assert "show_bases: false" in _options("accel", "Accelerator")


def test_a_class_whose_bases_are_documented_or_foreign_keeps_its_own_members():
    import accel_state

    # ProjectConfiguration has no base of its own package; KwargsHandler subclasses have a
    # base that accel_state exports (documented on the same page).
    assert hooks._hidden_bases(accel_state, accel_state.ProjectConfiguration) == []
    assert hooks._hidden_bases(accel_state, accel_state.AutocastKwargs) == []
    assert "inherited_members" not in _options("accel_state", "AutocastKwargs")
    assert "show_bases" not in _options("accel_state", "AutocastKwargs")
    assert hooks._hidden_bases(accel_state, accel_state.set_seed) == []

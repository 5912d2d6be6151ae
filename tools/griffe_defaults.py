"""A griffe extension of the docs build: signatures show the default a caller gets, never a
private sentinel.

A parameter whose default is a private name (``split_batches: bool = _UNSET``: "not given", so
that another setting decides) is shown with the value it takes when left out, computed from the
code at build time (``EFFECTIVE_DEFAULTS``); a private constant of the module
(``min_part=_MIN_PART``) is shown as its value (``1 << 20``). A sentinel neither explains is
left as it is, and ``tests/docs/test_built_site.py`` fails on it in the built pages. An attribute whose
value is computed by a private helper (``dataloader_config = _dataloader_config(...)``) is shown
without that value: the expression is an implementation detail, the attribute's docstring and
type say what it holds.

``mkdocs.yml`` loads it through the ``extensions`` option of mkdocstrings' python handler.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import griffe

PRIVATE_NAME = re.compile(r"(?<![\w.])_[A-Za-z]\w*")
"""A private name of the module (``_UNSET``, ``_helper(...)``), not an attribute (``torch._C``)."""


def _split_batches() -> str:
    from accel_data import DataLoaderConfiguration

    return repr(DataLoaderConfiguration().split_batches)


EFFECTIVE_DEFAULTS: dict[str, Callable[[], str]] = {
    # Left out, the data loader configuration decides (DataLoaderConfiguration's default).
    "accel._facade._accelerator.Accelerator.__init__(split_batches)": _split_batches,
}
"""``function path(parameter)`` -> the default shown, for parameters with a sentinel default."""


class EffectiveDefaults(griffe.Extension):
    """Replace sentinel defaults in signatures and private helper calls in attribute values."""

    def on_function(self, *, func: griffe.Function, **kwargs: Any) -> None:
        for parameter in func.parameters:
            default = parameter.default
            if default is None or not PRIVATE_NAME.search(str(default)):
                continue
            key = f"{func.path}({parameter.name})"
            if key in EFFECTIVE_DEFAULTS:
                parameter.default = EFFECTIVE_DEFAULTS[key]()
            elif (value := _constant(func, str(default))) is not None:
                parameter.default = value

    def on_attribute(self, *, attr: griffe.Attribute, **kwargs: Any) -> None:
        if attr.value is not None and PRIVATE_NAME.search(str(attr.value)):
            attr.value = None


def _constant(func: griffe.Function, name: str) -> str | None:
    """The value of ``name`` when it is a private constant of ``func``'s module (a literal or an
    expression of literals, not a sentinel object such as ``object()``)."""
    member = func.module.members.get(name)
    if not isinstance(member, griffe.Attribute) or member.value is None:
        return None
    value = str(member.value)
    if not value or PRIVATE_NAME.search(value) or "(" in value:
        return None
    return value

"""Sphinx roles (``:meth:`prepare```) in the docstrings, rendered as the site's own code and links.

The packages' docstrings name other objects with Sphinx roles; mkdocstrings renders Markdown,
where a role would print literally (``:meth:<code>prepare</code>``). ``tools/mkdocs_hooks.py``
runs :func:`link_roles` over every page once all pages are rendered: each role becomes a link to
the object's entry when the site documents it, and a plain code span when it does not. Section
titles taken from module docstrings go through :func:`roles_to_code` before they are rendered.

A target is looked up as written (``accel_data.skip_first_batches``), then under each object
that encloses the role on the page, innermost first (``:meth:`init_hook``` in a method of
``AlignDevicesHook`` finds ``accel_bigmodel.AlignDevicesHook.init_hook``), then at the top of
each package and on the ``Accelerator``.
"""

from __future__ import annotations

import bisect
import html
import re
from collections.abc import Callable, Sequence

ROLES = ("meth", "class", "func", "attr", "data", "obj", "mod", "exc", "const", "ref", "term")
_ROLE_NAME = r"(?:py:)?(?:" + "|".join(ROLES) + r")"
MARKDOWN_ROLE = re.compile(r":" + _ROLE_NAME + r":`([^`]+)`")
"""A role as written in a docstring: ``:meth:`prepare```."""
HTML_ROLE = re.compile(r":" + _ROLE_NAME + r":(?:<code>([^<]+)</code>|([A-Za-z_~.][\w.~]*[\w]))")
"""A role as Markdown renders it (``:meth:<code>prepare</code>``), or with its backticks lost
(``:class:AlignDevicesHook``)."""
RAW_ROLE = re.compile(r":" + _ROLE_NAME + r":(?:`|<code>|&#96;|[A-Za-z_~])")
"""Anything of a role left in rendered text: what the docs test looks for."""
_ANCHOR = re.compile(r'\bid="([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)"')

SEARCHED_PREFIXES = (
    "accel",
    "accel.Accelerator",
    "accel_state",
    "accel_collectives",
    "accel_data",
    "accel_bigmodel",
    "accel_pipeline",
    "accel_precision",
    "accel_trackers",
    "accel_launch",
    "accel.utils",
    "accel.inference",
)
"""Where a target that is neither a full path nor a member of an enclosing object is looked for."""


def _label(target: str) -> str:
    """The text shown for a target: ``~a.b.c`` shows ``c``; a leading ``.`` or ``!`` is dropped."""
    target = target.lstrip("!")
    if target.startswith("~"):
        return target[1:].rsplit(".", 1)[-1]
    return target.lstrip(".")


def _identifier(target: str) -> str:
    """The dotted name a target points at: no ``~``, ``!``, leading dot or call parentheses."""
    return target.lstrip("!~.").removesuffix("()")


def roles_to_code(text: str) -> str:
    """Every role of ``text`` (Markdown) as a code span: ``:class:`X``` -> ```X```."""
    return MARKDOWN_ROLE.sub(lambda m: f"`{_label(m.group(1))}`", text)


def candidates(target: str, enclosing: str | None) -> list[str]:
    """The identifiers ``target`` may mean, most specific first."""
    name = _identifier(target)
    found = [name]
    if enclosing:
        parts = enclosing.split(".")
        found += [".".join(parts[:i] + [name]) for i in range(len(parts), 0, -1)]
    found += [f"{prefix}.{name}" for prefix in SEARCHED_PREFIXES]
    return list(dict.fromkeys(found))


def link_roles(page_html: str, documented: Callable[[str], bool]) -> str:
    """``page_html`` with every role replaced by a link to its target where ``documented`` says
    the site has it (an ``<autoref>`` that autorefs resolves), else by a code span."""
    anchors = [(m.start(), m.group(1)) for m in _ANCHOR.finditer(page_html)]
    starts = [start for start, _ in anchors]

    def enclosing(position: int) -> str | None:
        index = bisect.bisect_right(starts, position) - 1
        return anchors[index][1] if index >= 0 else None

    def replace(match: re.Match[str]) -> str:
        target = html.unescape(match.group(1) or match.group(2))
        label = html.escape(_label(target), quote=False)
        at = match.start()
        if page_html.rfind("<", 0, at) > page_html.rfind(">", 0, at):  # in an attribute
            return label
        for identifier in candidates(target, enclosing(match.start())):
            if documented(identifier):
                return (
                    f'<autoref identifier="{html.escape(identifier)}" optional>'
                    f"<code>{label}</code></autoref>"
                )
        return f"<code>{label}</code>"

    return HTML_ROLE.sub(replace, page_html)


def raw_roles(text: str, context: int = 40) -> Sequence[str]:
    """Each place of ``text`` where a role is left, with ``context`` characters around it."""
    return [text[max(0, m.start() - context) : m.end() + context] for m in RAW_ROLE.finditer(text)]

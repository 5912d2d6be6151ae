"""Write the command line reference of the docs from the ``accel`` command's own parsers.

The page lists every subcommand with its ``--help`` text exactly as the command prints it (in
blocks of class ``cli-help``, which the site's stylesheet wraps at the column's width instead of
scrolling sideways), then one table per group of ``accel launch`` flags (flag, default, meaning). The docs build
calls ``render`` through ``tools/mkdocs_hooks.py``, so the page never goes stale.

Usage:
    python tools/gen_cli_docs.py            # print the page
    python tools/gen_cli_docs.py -o cli.md  # write it to a file
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterator
from pathlib import Path

from accel_launch.cli import build_parser

INTRO = """\
# Command line reference

Generated from the parsers of the `accel` command when the site is built: what you read here
is what `accel <command> --help` prints. `accel-launch ...` is the same as `accel launch ...`.
The guide to launching is [Launching](launch.md); the flags of the reference library that are
refused or read differently are in [Command line: differences](migration-cli.md).
"""


def _subparsers(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """``(name, parser)`` of each subcommand of ``parser``, in the order they were added."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, sub in action.choices.items():
                if id(sub) not in seen:
                    seen.add(id(sub))
                    yield name, sub


HELP_FENCE = "```{.text .cli-help}"
"""Opens a ``--help`` block: wrapped by ``docs/stylesheets/extra.css``, not scrolled."""
HELP_COLUMNS = "78"
"""The width ``--help`` is formatted at: about what the site's code font fits in its column."""


def _help(parser: argparse.ArgumentParser) -> str:
    """The ``--help`` text at a fixed width, whatever the terminal."""
    previous = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        return parser.format_help().rstrip()
    finally:
        if previous is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = previous


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def _default(action: argparse.Action) -> str:
    if action.default in (None, argparse.SUPPRESS) or isinstance(action, argparse._StoreTrueAction):
        return ""
    return f"`{action.default}`"


def flags_tables(parser: argparse.ArgumentParser) -> str:
    """One markdown table per argument group of ``parser`` (flags, default, meaning)."""
    out = []
    for group in parser._action_groups:
        rows = [
            action
            for action in group._group_actions
            if action.option_strings and action.help != argparse.SUPPRESS and action.dest != "help"
        ]
        if not rows:
            continue
        title = group.title or "Other"
        out += [f"### {title[:1].upper()}{title[1:]}", "", "| flag | default | meaning |"]
        out.append("| --- | --- | --- |")
        for action in rows:
            flags = ", ".join(f"`{flag}`" for flag in action.option_strings)
            out.append(f"| {flags} | {_default(action)} | {_cell(action.help or '')} |")
        out.append("")
    return "\n".join(out)


def render() -> str:
    """The whole command line reference page, as markdown."""
    root = build_parser()
    parts = [INTRO, "## `accel`", "", HELP_FENCE, _help(root), "```", ""]
    launch = None
    for name, sub in _subparsers(root):
        parts += [f"## `accel {name}`", "", HELP_FENCE, _help(sub), "```", ""]
        for child_name, child in _subparsers(sub):
            parts += [f"### `accel {name} {child_name}`", "", HELP_FENCE, _help(child), "```", ""]
        if name == "launch":
            launch = sub
    if launch is not None:
        parts += ["## Flags of `accel launch`, by group", "", flags_tables(launch)]
    return "\n".join(parts).rstrip() + "\n"


def main(argv: list[str] | None = None) -> int:
    """Print the page, or write it to ``--output``."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-o", "--output", type=Path, default=None, help="File to write.")
    args = parser.parse_args(argv)
    page = render()
    if args.output is None:
        sys.stdout.write(page)
    else:
        args.output.write_text(page, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The command line reference is generated from the ``accel`` parsers: every subcommand, its
``--help`` text as the command prints it, and a table row for every ``accel launch`` flag."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from accel_launch.cli import build_parser

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import load_module

gen_cli_docs = load_module("tools/gen_cli_docs.py")


def test_every_subcommand_and_launch_flag_is_on_the_page() -> None:
    page = gen_cli_docs.render()
    parser = build_parser()
    commands = dict(gen_cli_docs._subparsers(parser))
    assert {"launch", "config", "env", "test", "estimate-memory", "merge-weights"} <= set(commands)
    for name, sub in commands.items():
        assert f"## `accel {name}`" in page
        assert f"usage: {sub.prog} " in page  # the --help text itself
    launch_flags = [
        action.option_strings[0]
        for action in commands["launch"]._actions
        if action.option_strings and action.help != argparse.SUPPRESS and action.dest != "help"
    ]
    assert "--num_processes" in launch_flags
    for flag in launch_flags:
        assert f"| `{flag}`" in page, flag
    assert "### `accel config default`" in page


def test_no_help_text_shows_rest_markup() -> None:
    """``--help`` is read in a terminal and on the site: no reST double backticks or roles."""
    root = build_parser()
    texts = {"accel": gen_cli_docs._help(root)}
    for name, sub in gen_cli_docs._subparsers(root):
        texts[f"accel {name}"] = gen_cli_docs._help(sub)
        for child_name, child in gen_cli_docs._subparsers(sub):
            texts[f"accel {name} {child_name}"] = gen_cli_docs._help(child)
    marked = {
        command: [line.strip() for line in text.splitlines() if "``" in line or ":class:" in line]
        for command, text in texts.items()
    }
    assert not {command: lines for command, lines in marked.items() if lines}

"""The command line reference is generated from the ``accel`` parsers: every subcommand, its
``--help`` text as the command prints it, and a table row for every ``accel launch`` flag."""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

from accel_launch.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gen_cli_docs", ROOT / "tools" / "gen_cli_docs.py")
assert spec is not None and spec.loader is not None
gen_cli_docs = importlib.util.module_from_spec(spec)
sys.modules["gen_cli_docs"] = gen_cli_docs
spec.loader.exec_module(gen_cli_docs)


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

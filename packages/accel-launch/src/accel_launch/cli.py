"""Entry points of the ``accel`` and ``accel-launch`` commands."""

from __future__ import annotations

import argparse
import sys

from ._config import ConfigError


def build_parser() -> argparse.ArgumentParser:
    """The ``accel`` command and its subcommands."""
    from ._commands import add_subcommands

    parser = argparse.ArgumentParser(prog="accel", description="Launch and configure accel jobs.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    add_subcommands(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    """``accel <command> ...``."""
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] in (["launch"], ["test"]):
        from ._flags import add_launch_arguments, normalize_argv

        argv = [argv[0], *normalize_argv(argv[1:], add_launch_arguments(argparse.ArgumentParser()))]
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"accel {args.command}: error: {err}", file=sys.stderr)
        return 2


def launch_main(argv: list[str] | None = None) -> int:
    """``accel-launch ...`` (the same as ``accel launch ...``)."""
    return main(["launch", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

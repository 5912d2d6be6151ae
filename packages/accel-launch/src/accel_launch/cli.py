"""Entry points of the ``accel`` and ``accel-launch`` commands."""

from __future__ import annotations

import argparse
import sys

from ._config import ConfigError


def build_parser() -> argparse.ArgumentParser:
    """The ``accel`` command and its subcommands."""
    from ._commands import add_subcommands
    from ._flags import FlagParser

    parser = FlagParser(prog="accel", description="Launch and configure accel jobs.")
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
    except KeyboardInterrupt:
        start = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
        print(
            f"{start}accel {args.command}: interrupted (Ctrl-C); {_LEFT[args.command]}",
            file=sys.stderr,
        )
        return INTERRUPTED


INTERRUPTED = 130
"""Exit code after Ctrl-C (128 + SIGINT), as a shell reports it."""

_LEFT = {
    "launch": "every process it started was stopped.",
    "test": "every process it started was stopped.",
    "config": "nothing was written.",
    "merge-weights": "files it wrote may be incomplete: delete them before merging again.",
    "estimate-memory": "nothing was written.",
    "env": "nothing was written.",
}


def launch_main(argv: list[str] | None = None) -> int:
    """``accel-launch ...`` (the same as ``accel launch ...``)."""
    return main(["launch", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())

"""Entry points of the ``accel`` and ``accel-launch`` commands."""

from __future__ import annotations

import argparse
import sys

from ._config_file import ConfigError


def build_parser() -> argparse.ArgumentParser:
    """The ``accel`` command and its subcommands."""
    from ._commands import add_subcommands
    from ._flags import FlagParser

    parser = FlagParser(prog="accel", description="Launch and configure accel jobs.")
    parser.add_argument(
        "--version", action="version", version=version_line(), help="Print the version and exit."
    )
    sub = parser.add_subparsers(dest="command", metavar="command")
    add_subcommands(sub)
    _dash_spellings_everywhere(parser)
    return parser


def _dash_spellings_everywhere(parser: argparse.ArgumentParser) -> None:
    """Every subcommand, at any depth, takes ``--kebab-case`` for each ``--snake_case`` flag (as
    ``accel launch`` does): ``accel test --num-processes 1`` is ``--num_processes 1``."""
    from ._flags import add_dash_spellings

    add_dash_spellings(parser, shown=False)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                _dash_spellings_everywhere(child)


def version_line() -> str:
    """``accel-launch 0.1.0`` (and the meta-package's version when it is installed), read from
    the installed distributions' metadata: nothing is imported."""
    from importlib.metadata import PackageNotFoundError, version

    line = f"accel-launch {version('accel-launch')}"
    try:
        return f"{line} (accel-torch {version('accel-torch')})"
    except PackageNotFoundError:
        return line


def parse_args(argv: list[str]) -> argparse.Namespace:
    """Parse an ``accel`` command line (``["launch", "--num_processes", "2", "train.py"]``)
    exactly as the command does, without running it.

    Args:
        argv: The words after ``accel``.

    Returns:
        The parsed settings; for ``launch``, one attribute per flag (``None`` when not given).
    """
    parser = build_parser()
    if argv[:1] in (["launch"], ["test"]):
        from ._flags import add_launch_arguments, normalize_argv

        argv = [argv[0], *normalize_argv(argv[1:], add_launch_arguments(argparse.ArgumentParser()))]
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """``accel <command> ...``."""
    args = parse_args(list(sys.argv[1:] if argv is None else argv))
    if not getattr(args, "func", None):
        build_parser().print_help()
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
    "to-fsdp2": "the output file may be incomplete: convert again.",
    "tpu-config": "the pod's workers may have run part of the commands.",
}


def launch_main(argv: list[str] | None = None) -> int:
    """``accel-launch ...`` (the same as ``accel launch ...``); ``accel-launch --version``."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:
        print(version_line())
        return 0
    return main(["launch", *words])


if __name__ == "__main__":
    sys.exit(main())

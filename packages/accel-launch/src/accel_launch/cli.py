"""Entry points of the ``accel`` and ``accel-launch`` commands."""

from __future__ import annotations

import argparse
import atexit
import os
import sys
import threading
from collections.abc import Sequence
from typing import NoReturn

from ._errors import ConfigError


def build_parser(prog: str = "accel") -> argparse.ArgumentParser:
    """The ``accel`` command and its subcommands (named ``prog`` in help and errors)."""
    from ._flags import FlagParser
    from .commands._commands import add_subcommands

    parser = FlagParser(prog=prog, description="Launch and configure accel jobs.")
    parser.add_argument("--version", action=_VersionAction, help="Print the version and exit.")
    sub = parser.add_subparsers(dest="command", metavar="command")
    add_subcommands(sub)
    for name, child in sub.choices.items():
        # The name in messages: `tpu-config --command ...` fills `args.command` with its own value.
        child.set_defaults(subcommand=name)
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


class _VersionAction(argparse.Action):
    """``--version``: reads the installed metadata only when asked (not on every command)."""

    def __init__(self, option_strings: Sequence[str], dest: str, help: str | None = None) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, help=help)

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(version_line())
        parser.exit()


def version_line() -> str:
    """``accel-launch 0.1.0`` (and the meta-package's version when it is installed), read from
    the installed distributions' metadata: nothing is imported."""
    from importlib.metadata import PackageNotFoundError, version

    line = f"accel-launch {version('accel-launch')}"
    try:
        return f"{line} (accel-torch {version('accel-torch')})"
    except PackageNotFoundError:
        return line


def parse_args(argv: list[str], prog: str = "accel") -> argparse.Namespace:
    """Parse an ``accel`` command line (``["launch", "--num_processes", "2", "train.py"]``)
    exactly as the command does, without running it.

    Args:
        argv: The words after ``accel``.
        prog: The command's name in help and error messages.

    Returns:
        The parsed settings; for ``launch``, one attribute per flag (``None`` when not given).
    """
    parser = build_parser(prog)
    if argv[:1] in (["launch"], ["test"]):
        from ._flags import add_launch_arguments, normalize_argv

        argv = [argv[0], *normalize_argv(argv[1:], add_launch_arguments(argparse.ArgumentParser()))]
    return parser.parse_args(argv)


def main(argv: list[str] | None = None, prog: str = "accel") -> int:
    """``accel <command> ...`` (``prog`` names the command in help and error messages)."""
    args = parse_args(list(sys.argv[1:] if argv is None else argv), prog)
    if not getattr(args, "func", None):
        build_parser(prog).print_help()
        return 2
    command = args.subcommand
    try:
        return int(args.func(args) or 0)
    except ConfigError as err:
        print(f"{prog} {command}: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        start = "\n" if sys.stderr.isatty() else ""  # after the terminal's ^C
        print(
            f"{start}{prog} {command}: interrupted (Ctrl-C); {_LEFT[command]}",
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
    "install-command": "the command may be half written: run it again, or with --remove.",
}


def launch_main(argv: list[str] | None = None) -> int:
    """``accel-launch ...`` (the same as ``accel launch ...``); ``accel-launch --version``."""
    words = list(sys.argv[1:] if argv is None else argv)
    if words == ["--version"]:
        print(version_line())
        return 0
    return main(["launch", *words])


def reference_main(command: str, argv: list[str] | None = None) -> int:
    """Run one of the reference library's console scripts on accel: ``accelerate launch ...``
    is ``accel launch ...``, ``accelerate-config default`` is ``accel config default``.

    Under ``accel.install_as_accelerate()`` the reference's console scripts come here, as do
    the commands ``accel install-command`` writes.

    Args:
        command: A key of ``REFERENCE_COMMANDS``: ``"accelerate"``, ``"accelerate-launch"``,
            ``"accelerate-config"``, ``"accelerate-estimate-memory"`` or
            ``"accelerate-merge-weights"``.
        argv: The words after the command (default: ``sys.argv[1:]``).

    Returns:
        The exit code of accel's command.
    """
    words = list(sys.argv[1:] if argv is None else argv)
    from .commands._install_command import REFERENCE_COMMANDS

    prefix = REFERENCE_COMMANDS[command]
    if prefix == ("launch",) and words == ["--version"]:
        return launch_main(words)
    return main([*prefix, *words], prog="accelerate")


def exit_with(code: int) -> NoReturn:
    """End a console command with exit code ``code``, quickly once torch is loaded.

    A process that imported torch spends about half a second at exit tearing its modules down
    (2 s on a busy machine), longer than the launcher's own work. When torch is loaded and no
    other thread runs, the exit functions (``atexit``: logging's flush among them) run and the
    standard streams are flushed, then the process ends at once (``os._exit``), as it would
    after the teardown. Otherwise it exits as usual (``sys.exit``).
    """
    if "torch" in sys.modules and threading.active_count() == 1:
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):  # closed, or a reader that went away
                pass
        os._exit(code)
    sys.exit(code)


def command() -> NoReturn:
    """The ``accel`` console script."""
    exit_with(main())


def launch_command() -> NoReturn:
    """The ``accel-launch`` console script."""
    exit_with(launch_main())


if __name__ == "__main__":
    exit_with(main())

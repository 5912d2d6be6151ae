"""``accel install-command``: an opt-in ``accelerate`` command (and the reference's other
console scripts) that runs accel's command line, for an environment without the reference
library, so that ``accelerate launch train.py`` in shell scripts, Makefiles and READMEs runs on
accel unchanged.

Each command is a small script in the interpreter's scripts folder that sets
``ACCEL_AS_ACCELERATE=1`` (so the scripts it launches import accel as ``accelerate``) and runs
``accel_launch.cli.reference_main``. A marker line tells its own scripts from any other file:
a file it did not write (the reference's own command) is never overwritten or removed.
"""

from __future__ import annotations

import argparse
import os
import sys
import sysconfig
from pathlib import Path
from typing import Any

from .._errors import ConfigError

MARKER = "# accel install-command:"
"""The line that marks a script as written by ``accel install-command``."""

REFERENCE_COMMANDS: dict[str, tuple[str, ...]] = {
    "accelerate": (),
    "accelerate-config": ("config",),
    "accelerate-estimate-memory": ("estimate-memory",),
    "accelerate-launch": ("launch",),
    "accelerate-merge-weights": ("merge-weights",),
}
"""The reference library's console scripts -> the words of the ``accel`` command each one
runs (``accel_launch.cli.reference_main``)."""

NAMES = tuple(REFERENCE_COMMANDS)
"""The commands it can provide: the reference library's console scripts."""

# /bin/sh runs the `exec` line (any interpreter path, however long or with spaces); Python reads
# the same two lines as a string and goes on.
_TEMPLATE = """\
#!/bin/sh
'''exec' {python} "$0" "$@"
' '''
{marker} `{name}` runs accel's command line with ACCEL_AS_ACCELERATE=1.
# Remove it with: accel install-command --remove {name}
import os

os.environ["ACCEL_AS_ACCELERATE"] = "1"
from accel_launch.cli import exit_with, reference_main

exit_with(reference_main({name!r}))
"""


def add_install_command_parser(sub: Any) -> None:
    """Register ``accel install-command`` on the ``accel`` parser."""
    p = sub.add_parser(
        "install-command",
        help="Provide an `accelerate` command that runs accel (opt-in; --remove undoes it).",
        description="Write the reference library's commands (`accelerate`, `accelerate-launch` "
        "...) into this interpreter's scripts folder, each running accel's command line with "
        "ACCEL_AS_ACCELERATE=1, so that `accelerate launch train.py` runs on accel. A command "
        "that exists and was not written here (the reference's own, when it is installed) is "
        "left alone.",
    )
    p.add_argument(
        "names",
        nargs="+",
        metavar="name",
        help=f"The commands to provide (or remove): {', '.join(NAMES)}.",
    )
    p.add_argument(
        "--remove",
        action="store_true",
        help="Delete the named commands written by `accel install-command`.",
    )
    p.add_argument(
        "--scripts_dir",
        "--scripts-dir",
        dest="scripts_dir",
        default=None,
        help="The folder to write to (default: this interpreter's scripts folder, "
        f"{sysconfig.get_path('scripts')}).",
    )
    p.set_defaults(func=install_command)


def _is_ours(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            head = file.read(4096)
    except OSError:
        return False
    return MARKER.encode() in head


def _check_names(names: list[str]) -> None:
    unknown = [name for name in names if name not in NAMES]
    if unknown:
        raise ConfigError(
            f"accel install-command provides the reference library's commands {list(NAMES)}; "
            f"got {unknown}. Name one or more of those, e.g. `accel install-command accelerate`."
        )


def _switch_installed() -> bool:
    from importlib.metadata import PackageNotFoundError, version  # not on every command

    try:
        version("accel-torch")
    except PackageNotFoundError:
        return False
    return True


def install_command(args: argparse.Namespace) -> int:
    """Write (or with ``--remove`` delete) the commands ``args.names``.

    Raises:
        ConfigError: An unknown name; a file of that name that this command did not write (it
            is left as it is); Windows; accel-torch (which serves ``import accelerate``) is not
            installed.
    """
    _check_names(args.names)
    if os.name == "nt":
        raise ConfigError(
            "accel install-command writes POSIX scripts and does not run on Windows; run "
            "`accel launch ...` there, or set ACCEL_AS_ACCELERATE=1 with the reference installed."
        )
    folder = Path(args.scripts_dir or sysconfig.get_path("scripts"))
    paths = [folder / name for name in args.names]
    foreign = [str(p) for p in paths if (p.exists() or p.is_symlink()) and not _is_ours(p)]
    if foreign:
        what = "remove" if args.remove else "overwrite"
        raise ConfigError(
            f"accel install-command does not {what} a command it did not write; {foreign} "
            "exist and are not accel's (the reference library's own commands, when it is "
            "installed). Nothing was changed. With the reference installed, set "
            "ACCEL_AS_ACCELERATE=1 and its commands run accel; or uninstall it (pip uninstall "
            "accelerate) and run this again."
        )
    if args.remove:
        for path in paths:
            if path.exists():
                path.unlink()
                print(f"accel install-command: removed {path}")
            else:
                print(f"accel install-command: {path} does not exist; nothing to remove")
        return 0
    if not _switch_installed():
        raise ConfigError(
            "the commands accel install-command writes run scripts that import accelerate, "
            "which accel answers through accel-torch; accel-torch is not installed. Install it: "
            "pip install accel-torch"
        )
    folder.mkdir(parents=True, exist_ok=True)
    for path in paths:
        text = _TEMPLATE.format(python=_quoted(sys.executable), marker=MARKER, name=path.name)
        partial = path.with_name(f".{path.name}.accel-partial")
        partial.write_text(text)
        partial.chmod(0o755)
        os.replace(partial, path)
        print(f"accel install-command: wrote {path} (runs accel; remove with --remove)")
    return 0


def _quoted(text: str) -> str:
    """``text`` as one word for /bin/sh."""
    return "'" + text.replace("'", "'\"'\"'") + "'"

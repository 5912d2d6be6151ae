"""Run several ``accel`` commands in one process where importing torch or transformers fails,
printing each command's exit code and output between markers (the first argument, if any: a
folder holding a llama config.json for ``estimate-memory``)."""

from __future__ import annotations

import contextlib
import io
import sys
from importlib.machinery import ModuleSpec

HEAVY = {"torch", "transformers"}


class RefuseHeavy:
    """A meta-path finder that makes ``import torch`` fail, naming the rule."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> ModuleSpec:
        if name.split(".")[0] in HEAVY:
            raise ImportError(f"{name} was imported by a command that must not need it")
        return None  # type: ignore[return-value]


sys.meta_path.insert(0, RefuseHeavy())

from accel_launch.cli import launch_main, main  # noqa: E402

COMMANDS = [
    ["--version"],
    ["--help"],
    ["env"],
    ["config", "default"],
    ["test", "--help"],
    ["test", "--num_processes", "two"],
    ["launch-version"],
]
if len(sys.argv) > 1:  # a folder holding a llama config.json: estimated from its fields
    COMMANDS += [
        ["estimate-memory", sys.argv[1], "--json", "--dtypes", "bfloat16", "int4"],
        ["estimate-memory", sys.argv[1], "--dtypes", "float32"],
    ]

for argv in COMMANDS:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = launch_main(["--version"]) if argv == ["launch-version"] else main(argv)
        except SystemExit as exit_:
            code = exit_.code
    print(f"=== {' '.join(argv)} -> {code}")
    print(out.getvalue() + err.getvalue())
print("=== torch imported:", "torch" in sys.modules)

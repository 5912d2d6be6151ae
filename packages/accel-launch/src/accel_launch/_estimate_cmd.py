"""``accel estimate-memory``: memory a model needs per dtype, offline."""

from __future__ import annotations

import argparse
import dataclasses
import json

from ._errors import ConfigError

DTYPES = ("float32", "float16", "bfloat16", "int8", "int4")


def add_estimate_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``accel estimate-memory``."""
    parser.add_argument(
        "model",
        help="A local folder or file holding a transformers config.json, or "
        "'package.module:Class' (a class built with no arguments).",
    )
    parser.add_argument(
        "--dtypes",
        nargs="+",
        default=["float32", "float16", "int8", "int4"],
        choices=DTYPES,
        help="Dtypes to report (default: float32 float16 int8 int4).",
    )
    parser.add_argument("--json", action="store_true", help="Print JSON rows instead of a table.")


def estimate_memory_command(args: argparse.Namespace) -> int:
    """Print the estimate of ``args.model`` for each dtype."""
    from accel_bigmodel import estimate_memory, format_memory_table

    try:
        rows = estimate_memory(args.model, dtypes=args.dtypes)
    except (FileNotFoundError, ValueError, ImportError) as err:
        raise ConfigError(str(err)) from None
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    else:
        print(format_memory_table(rows, title=f"Memory needed by {args.model}"))
    return 0

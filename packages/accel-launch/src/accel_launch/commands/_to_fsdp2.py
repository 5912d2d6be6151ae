"""``accel to-fsdp2``: rewrite the FSDP section of a config file from FSDP1 keys to FSDP2 keys.

FSDP2 (``fully_shard``) has no sharding strategy: whether parameters are freed after the
forward pass is ``fsdp_reshard_after_forward``. It also drops the prefetch, module-state sync
and original-parameter settings, which it handles by itself.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..configs._config_file import config_from_dict, read_raw, write_config_data
from ..configs._migrate import migrate

RESHARDS = {
    "FULL_SHARD": True,
    "SHARD_GRAD_OP": False,
    "HYBRID_SHARD": True,
    "HYBRID_SHARD_ZERO2": False,
    "NO_SHARD": False,
}
"""FSDP1 sharding strategy -> FSDP2 ``reshard_after_forward``."""

DROPPED = {
    "fsdp_backward_prefetch": "FSDP2 prefetches by itself",
    "fsdp_forward_prefetch": "FSDP2 has no such setting yet",
    "fsdp_sync_module_states": "FSDP2 broadcasts module states by itself",
    "fsdp_use_orig_params": "FSDP2 always keeps the original parameters",
}
"""FSDP1 keys with no FSDP2 counterpart, and why."""


def add_to_fsdp2_arguments(parser: argparse.ArgumentParser) -> None:
    """Flags of ``accel to-fsdp2``."""
    parser.add_argument(
        "--config_file",
        "--config-file",
        required=True,
        help="The config file to convert (its fsdp_config section).",
    )
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="Allow writing over an existing file (the input itself when no --output_file).",
    )
    parser.add_argument(
        "--output_file",
        "--output-file",
        default=None,
        help="Where to write the converted config (default with --overwrite: the input file).",
    )


def convert_to_fsdp2(data: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Return a copy of a config mapping with FSDP2 keys in ``fsdp_config``, and the changes.

    A config with no ``fsdp_config``, or one already at ``fsdp_version: 2``, comes back
    unchanged with no changes listed.
    """
    fsdp = data.get("fsdp_config") or {}
    if not fsdp or str(fsdp.get("fsdp_version", 1)) == "2":
        return dict(data), []
    converted: dict[str, Any] = {}
    changes: list[str] = []
    for key, value in fsdp.items():
        if key in DROPPED:
            changes.append(f"removed {key} ({DROPPED[key]})")
        elif key in ("fsdp_sharding_strategy", "fsdp_reshard_after_forward") and value in RESHARDS:
            converted["fsdp_reshard_after_forward"] = RESHARDS[value]
            changes.append(f"{key}: {value} -> fsdp_reshard_after_forward: {RESHARDS[value]}")
        elif key != "fsdp_version":
            converted[key] = value
    converted["fsdp_version"] = 2
    changes.append("fsdp_version: 2")
    return {**data, "fsdp_config": converted}, changes


def fsdp2_paths(args: argparse.Namespace) -> tuple[Path, Path]:
    """The file ``accel to-fsdp2`` reads and the one it writes, checked.

    Raises:
        FileNotFoundError: ``--config_file`` does not exist.
        ValueError: neither ``--output_file`` nor ``--overwrite`` is given.
        FileExistsError: the output file exists and ``--overwrite`` is not set.
        IsADirectoryError: the output path is a folder.
    """
    source = Path(args.config_file)
    if not source.is_file():
        raise FileNotFoundError(
            f"accel to-fsdp2 converts an existing config file; {str(source)!r} does not exist. "
            "Pass the path of the file `accel config` wrote."
        )
    if args.output_file is None and not args.overwrite:
        raise ConfigError(
            "accel to-fsdp2 needs a place to write; got neither --output_file nor --overwrite. "
            "Pass --output_file new.yaml, or --overwrite to rewrite the input file."
        )
    target = Path(args.output_file) if args.output_file else source
    if target.is_dir():
        raise IsADirectoryError(
            f"--output_file {str(target)!r} is a folder; to-fsdp2 writes one config file. Pass "
            "a file path, e.g. --output_file fsdp2.yaml."
        )
    if target.exists() and not args.overwrite:
        raise FileExistsError(
            f"--output_file {str(target)!r} already exists and --overwrite is not set. Choose "
            "another path, or add --overwrite."
        )
    return source, target


def to_fsdp2_command(args: argparse.Namespace) -> int:
    """Convert ``args.config_file`` and write the result; return the exit code."""
    try:
        source, target = fsdp2_paths(args)
    except (FileNotFoundError, FileExistsError, IsADirectoryError) as err:
        raise ConfigError(str(err)) from None
    return write_fsdp2(source, target)


def write_fsdp2(source: Path, target: Path) -> int:
    """Write the FSDP2 conversion of the config file ``source`` to ``target``; print what
    changed. Returns the exit code (0)."""
    raw = read_raw(source)
    converted, changes = convert_to_fsdp2(raw)
    # Checked as accel reads it before writing; written with the file's own keys, as the
    # reference writes it (not every setting with its default, nor a config_version it lacked).
    config_from_dict(migrate(converted)[0], source=f"{source} converted to FSDP2")
    old_text = source.read_text()
    write_config_data(target, converted, old_text if target.suffix != ".json" else None)
    if not changes:
        why = "already uses FSDP2" if raw.get("fsdp_config") else "has no fsdp_config"
        print(f"accel to-fsdp2: {source} {why}; wrote it unchanged to {target}.")
        return 0
    print(f"accel to-fsdp2: wrote {target}:")
    for change in changes:
        print(f"  - {change}")
    return 0

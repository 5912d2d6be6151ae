"""Subcommands of ``accel``: launch, config, env, test."""

from __future__ import annotations

import argparse
import shutil
import sys
from pathlib import Path
from typing import Any

from accel_state import PrecisionType

from .._device_files import accelerator_device_files
from .._errors import ConfigError
from .._flags import _StatedValueError, add_launch_arguments, integer
from ..configs._comments import has_comments
from ..configs._config_file import (
    config_from_dict,
    default_config_file,
    read_raw,
    write_basic_config,
)
from ..configs._migrate import migrate
from ._env_cmd import env_command
from ._estimate_cmd import add_estimate_arguments, estimate_memory_command
from ._install_command import add_install_command_parser
from ._to_fsdp2 import add_to_fsdp2_arguments, to_fsdp2_command
from ._tpu import add_tpu_config_parser

TEST_MODULE = "accel_launch.test_script"


def add_subcommands(sub: Any) -> None:
    """Register every subcommand on the ``accel`` parser."""
    p = sub.add_parser("launch", help="Run a script on one or many processes.")
    add_launch_arguments(p)
    p.set_defaults(func=_launch)

    p = sub.add_parser(
        "config", help="Answer questions about this machine and write the config file."
    )
    p.add_argument(
        "--config_file",
        default=None,
        help=f"Where to write (default: {default_config_file()}, or $ACCEL_CONFIG_HOME).",
    )
    csub = p.add_subparsers(dest="config_command", metavar="subcommand")
    d = csub.add_parser("default", help="Write a basic config for this machine, no questions.")
    d.add_argument("--config_file", default=argparse.SUPPRESS, help="Where to write.")
    d.add_argument(
        "--mixed_precision", default="no", type=_precision, help="no, fp16, bf16 or fp8."
    )
    d.set_defaults(func=_config_default)
    u = csub.add_parser("update", help="Rewrite a config file of an older format.")
    u.add_argument("--config_file", default=argparse.SUPPRESS, help="The file to update.")
    u.set_defaults(func=_config_update)
    i = csub.add_parser(
        "import",
        help="Check a config file of the reference library (accelerate) and write it as "
        "accel's config file.",
    )
    i.add_argument(
        "path",
        nargs="?",
        default=None,
        help="The file to import (default: $HF_HOME/accelerate/default_config.yaml).",
    )
    i.add_argument("--config_file", default=argparse.SUPPRESS, help="Where to write.")
    i.add_argument("--overwrite", action="store_true", help="Replace an existing config file.")
    i.set_defaults(func=_config_import)
    p.set_defaults(func=_config_questions)

    p = sub.add_parser(
        "estimate-memory", help="Memory a model needs per dtype, offline, without weights."
    )
    add_estimate_arguments(p)
    p.set_defaults(func=estimate_memory_command)

    p = sub.add_parser(
        "merge-weights",
        help="Merge a sharded torch.distributed.checkpoint folder into safetensors.",
    )
    p.add_argument("checkpoint_directory", help="Folder of the sharded checkpoint (.metadata).")
    p.add_argument("output_path", help="Folder to write model.safetensors (and shards) to.")
    p.add_argument(
        "--max_shard_size",
        default="10GB",
        type=_shard_size,
        help="Largest output file; above it the weights are split with an index (default 10GB).",
    )
    p.add_argument(
        "--trust_pickles",
        "--trust-pickles",
        dest="trust_pickles",
        action="store_true",
        help="Unpickle the checkpoint's metadata with no restriction: only for a checkpoint you "
        "trust (by default a file that would run code is refused).",
    )
    p.add_argument(
        "--unsafe_serialization",
        "--unsafe-serialization",
        action="store_true",
        help="Refused: the merged weights are always written as safetensors (a pickled "
        ".bin file runs code when loaded).",
    )
    p.add_argument(
        "--remove_checkpoint_dir",
        "--remove-checkpoint-dir",
        action="store_true",
        help="Delete the sharded checkpoint folder once every merged file is written.",
    )
    p.set_defaults(func=_merge_weights)

    p = sub.add_parser(
        "to-fsdp2", help="Convert the FSDP section of a config file from FSDP1 to FSDP2 keys."
    )
    add_to_fsdp2_arguments(p)
    p.set_defaults(func=to_fsdp2_command)

    add_tpu_config_parser(sub)

    p = sub.add_parser("env", help="Print versions and the resolved config, for bug reports.")
    p.add_argument(
        "--config_file", default=None, help="The config file to show (default: the default one)."
    )
    p.set_defaults(func=env_command)

    p = sub.add_parser(
        "test",
        help="Check state, process control and collectives on the configured processes.",
        description="Start the processes the config file (or these flags) describes and run "
        "every check on them: process state, process control, splitting work, collectives. "
        "Each check is named as it passes; the exit code is 0 when all pass.",
    )
    p.add_argument(
        "--config_file",
        default=None,
        help="Config file to test (default: the default config file, as `accel launch`).",
    )
    p.add_argument(
        "--num_processes",
        type=integer,
        default=None,
        help="Total number of processes over all machines (overrides the config file).",
    )
    p.add_argument(
        "--num_machines", type=integer, default=None, help="Number of machines (default 1)."
    )
    p.add_argument(
        "--machine_rank",
        type=integer,
        default=None,
        help="This machine's rank, 0 to num_machines - 1 (several machines).",
    )
    p.add_argument(
        "--main_process_ip",
        default=None,
        help="Address of machine 0 (several machines).",
    )
    p.add_argument(
        "--main_process_port",
        type=integer,
        default=None,
        help="Rendezvous port (absent: a free port on one machine, 29500 on several).",
    )
    p.add_argument(
        "--cpu",
        action="store_true",
        default=None,
        help="Run on CPU processes even when accelerators are present.",
    )
    p.set_defaults(func=_test)

    add_install_command_parser(sub)


def _precision(text: str) -> str:
    try:
        return str(PrecisionType.parse(text, "mixed precision").value)
    except ValueError as err:
        raise _StatedValueError(str(err)) from None


def _shard_size(text: str) -> int:
    from ._merge import shard_size_bytes

    try:
        return shard_size_bytes(text)
    except ConfigError as err:
        raise _StatedValueError(str(err).removeprefix("max_shard_size: ")) from None


def _launch(args: argparse.Namespace) -> int:
    from .._launch import launch

    if not getattr(args, "config_file", None):
        _print_reference_notice("launch")
    return launch(args)


def _print_reference_notice(command: str) -> None:
    from ..configs._config_import import reference_config_notice

    notice = reference_config_notice(command)
    if notice:
        print(notice, file=sys.stderr)


def _config_import(args: argparse.Namespace) -> int:
    from ..configs._config_import import import_config, reference_config_file

    source = args.path or reference_config_file()
    target, _, changes = import_config(
        source, getattr(args, "config_file", None), overwrite=args.overwrite
    )
    print(f"accel config: imported {source} into {target}")
    for change in changes:
        print(f"  - {change}")
    return 0


def _config_questions(args: argparse.Namespace) -> int:
    from ..questionnaire._prompts import Prompter
    from ..questionnaire._questionnaire import run_questionnaire

    if not args.config_file:
        _print_reference_notice("config")
    target = Path(args.config_file) if args.config_file else default_config_file()
    config = run_questionnaire(Prompter())
    config.save(target)
    print(f"accel config: wrote {target}")
    return 0


def _config_update(args: argparse.Namespace) -> int:
    target = Path(args.config_file) if args.config_file else default_config_file()
    if not target.is_file():
        raise ConfigError(
            f"accel config update rewrites an existing file; {str(target)!r} does not exist. "
            "Create one with `accel config` or `accel config default`."
        )
    updated, changes = migrate(read_raw(target))
    config = config_from_dict(updated, source=str(target))
    if not changes:
        print(f"accel config: {target} is already up to date.")
        return 0
    old_text = target.read_text()
    backup = target.with_name(target.name + ".bak")
    shutil.copy2(target, backup)
    config.save(target, comments_of=old_text if target.suffix != ".json" else None)
    print(f"accel config: updated {target} (the old version is kept in {backup}):")
    for change in changes:
        print(f"  - {change}")
    if target.suffix != ".json" and has_comments(old_text):
        print("  - kept its comments, each above the key it belonged to")
    return 0


def _merge_weights(args: argparse.Namespace) -> int:
    from ._merge import check_merge_arguments, merge_fsdp_weights, reporting

    if args.unsafe_serialization:
        raise ConfigError(
            "accel merge-weights writes safetensors only, because a pickled .bin file runs code "
            "when it is loaded; got --unsafe_serialization. Drop the flag: transformers and "
            "accel load model.safetensors directly."
        )
    # Every argument is checked before torch is imported (seconds on a busy machine).
    check_merge_arguments(
        args.checkpoint_directory,
        args.output_path,
        args.max_shard_size,
        args.remove_checkpoint_dir,
    )
    from ._status import status

    with status("accel merge-weights: importing torch (seconds on a busy machine)"):
        from accel_bigmodel import UntrustedPickleError

    try:
        with reporting(sys.stderr):
            written = merge_fsdp_weights(
                args.checkpoint_directory,
                args.output_path,
                remove_checkpoint_dir=args.remove_checkpoint_dir,
                max_shard_size=args.max_shard_size,
                trust_pickles=args.trust_pickles,
            )
    except UntrustedPickleError as err:
        raise ConfigError(str(err)) from None
    except OSError as err:  # a full disk, a file of the checkpoint that cannot be read
        raise ConfigError(err.strerror if isinstance(err.strerror, str) else str(err)) from None
    for path in written:
        print(f"accel merge-weights: wrote {path}")
    if args.remove_checkpoint_dir:
        print(f"accel merge-weights: removed {args.checkpoint_directory}")
    return 0


def _config_default(args: argparse.Namespace) -> int:
    target = Path(args.config_file) if args.config_file else default_config_file()
    if not target.exists() and accelerator_device_files() != []:
        print(
            "accel config: counting this machine's accelerators (importing torch takes a few "
            "seconds)...",
            file=sys.stderr,
            flush=True,
        )
    written = write_basic_config(getattr(args, "mixed_precision", "no"), save_location=target)
    if written is False:
        print(f"accel config: {target} already exists; left unchanged (delete it to rewrite).")
    else:
        print(f"accel config: wrote {written}")
    return 0


def _test(args: argparse.Namespace) -> int:
    from .._launch import launch

    parser = argparse.ArgumentParser()
    add_launch_arguments(parser)
    argv: list[str] = []
    for name in (
        "config_file",
        "num_processes",
        "num_machines",
        "machine_rank",
        "main_process_ip",
        "main_process_port",
    ):
        value = getattr(args, name)
        if value is not None:
            argv += [f"--{name}", str(value)]
    if args.cpu:
        argv.append("--cpu")
    launch_args = parser.parse_args([*argv, "--module", TEST_MODULE])
    from .._resolve import resolve

    # Refuse what the launch would refuse before saying the processes start; the plan's
    # warnings are printed once, by the launch itself.
    resolve(launch_args)
    print(
        "accel test: starting the processes (each imports torch first: a few seconds)",
        flush=True,
    )
    code = launch(launch_args)
    print(
        "accel test: " + ("all checks passed." if code == 0 else f"FAILED (exit code {code})."),
        file=sys.stderr if code else sys.stdout,
    )
    return code

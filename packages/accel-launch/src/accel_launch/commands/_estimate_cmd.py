"""``accel estimate-memory``: memory a model needs per dtype, offline."""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ..configs._estimate_bounds import check_config_numbers
from ._status import status

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
    parser.add_argument(
        "--library_name",
        "--library-name",
        default=None,
        choices=("transformers", "timm"),
        help="Library of the model: transformers (the default; timm is refused by this version).",
    )
    parser.add_argument(
        "--trust_remote_code",
        "--trust-remote-code",
        action="store_true",
        help="Run the model code a transformers folder ships (config.json `auto_map`): only for "
        "a folder you trust. Without it such a folder is refused.",
    )


def _remote_code_model(model: str, trust: bool) -> Any:
    """The model built from the code shipped in ``model``'s folder, or ``None`` when its
    config.json names no such code."""
    config_path = Path(model) / "config.json" if Path(model).is_dir() else Path(model)
    if not config_path.is_file():
        return None
    try:
        data = json.loads(config_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not data.get("auto_map"):
        return None
    if not trust:
        raise ConfigError(
            f"{config_path} names model code shipped in its folder (auto_map: "
            f"{sorted(data['auto_map'])}); running that code needs consent. Pass "
            "--trust_remote_code, only for a folder you trust."
        )
    try:
        import transformers
    except ImportError:
        raise ConfigError(
            f"{config_path} names model code shipped in its folder, which transformers builds; "
            'transformers is not installed. Install it: pip install "transformers>=4.45".'
        ) from None
    from accel_bigmodel import init_empty_weights

    folder = str(config_path.parent)
    config = transformers.AutoConfig.from_pretrained(folder, trust_remote_code=True)
    with init_empty_weights():
        for auto in (transformers.AutoModelForCausalLM, transformers.AutoModel):
            try:
                return auto.from_config(config, trust_remote_code=True)
            except ValueError:
                continue
    raise ConfigError(
        f"{config_path}: its auto_map names no model class transformers can build "
        f"({sorted(data['auto_map'])}). Add an AutoModel or AutoModelForCausalLM entry."
    )


@contextmanager
def library_noise_silenced() -> Iterator[None]:
    """Silence what torch and its extensions report while transformers imports them.

    Such messages (torch's logger on Enum registrations by torchao, deprecation warnings of
    torch modules) are about the installed libraries, not the user's model; transformers' own
    messages about the config stay.
    """
    import torch  # noqa: F401  (torch configures its logger when imported)

    logger = logging.getLogger("torch")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", module=r"(torch|torchao)(\.|$)")
            yield
    finally:
        logger.setLevel(level)


def _check_model_argument(model: str) -> None:
    """Refuse, before torch is imported, a model that is neither a local path nor a
    'module:Class' path (a Hub id, a typo): nothing is downloaded."""
    if Path(model).exists():
        _check_config_json(Path(model))
        return
    if ":" in model:
        return
    hub = re.fullmatch(r"[\w.-]+/[\w.-]+", model) is not None
    what = (
        "looks like a Hub id, which this offline command does not download"
        if hub
        else ("is not an existing path")
    )
    raise ConfigError(
        "accel estimate-memory builds a local config.json (or its folder) or a "
        f"'package.module:Class' path; {model!r} {what}. Pass the folder holding the model's "
        "config.json (download the config first), or 'package.module:Class'."
    )


def _config_file(path: Path) -> Path | None:
    """The config.json a local model argument names (the file, or the one in the folder)."""
    if path.is_dir():
        return path / "config.json" if (path / "config.json").is_file() else None
    return path


def _check_config_json(path: Path) -> None:
    """Refuse, before torch is imported, a local model argument that is not a config.json
    holding a JSON object with a ``model_type``, or whose numbers no model has (see
    ``check_config_numbers``), naming the file."""
    config = _config_file(path)
    if config is None:
        raise ConfigError(
            f"accel estimate-memory reads a model's config.json; the folder {str(path)!r} holds "
            "none. Pass the folder a transformers model was saved to (or its config.json)."
        )
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        hint = (
            "Fix the file (or write it again with config.save_pretrained)."
            if config.suffix == ".json"
            else "Pass a model's config.json (or its folder), or 'package.module:Class' for a "
            "class of a Python file on the path."
        )
        raise ConfigError(
            f"accel estimate-memory reads a model's config.json as JSON; {str(config)!r} is not "
            f"valid JSON ({err.msg} at line {err.lineno}, column {err.colno}). {hint}"
        ) from None
    except (OSError, UnicodeDecodeError) as err:
        raise ConfigError(
            f"accel estimate-memory reads a model's config.json; {str(config)!r} cannot be "
            f"read ({err}). Check the file and its permissions."
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            f"a model's config.json holds one JSON object; {str(config)!r} holds a "
            f"{type(data).__name__}. Pass the config.json of a transformers model."
        )
    if "model_type" not in data and not data.get("auto_map"):
        raise ConfigError(
            f"a transformers config.json names its model_type; {str(config)!r} has none (its "
            f"keys: {sorted(data)[:10]}). Pass a config.json saved by transformers."
        )
    check_config_numbers(data, str(config))


def _innermost(err: BaseException) -> BaseException:
    while err.__cause__ is not None or (
        err.__context__ is not None and not err.__suppress_context__
    ):
        err = err.__cause__ or err.__context__  # type: ignore[assignment]
    return err


def estimate_memory_command(args: argparse.Namespace) -> int:
    """Print the estimate of ``args.model`` for each dtype."""
    from accel_bigmodel import format_memory_table

    rows = estimate_rows(args)
    if args.json:
        print(json.dumps([dataclasses.asdict(r) for r in rows], indent=2))
    else:
        print(format_memory_table(rows, title=f"Memory needed by {args.model}"))
    return 0


def add_timm_hub_prefix(model_name: str) -> str:
    """The name ``timm.create_model`` needs for ``model_name``: a Hub repo id
    (``timm/resnet50.a1_in1k``) gets the ``hf-hub:`` source prefix; an architecture of timm's
    registry (``resnet50``) and a name that already has a source (``local-dir:/path``) are
    returned as they are."""
    if ":" in model_name or "/" not in model_name:
        return model_name
    return f"hf-hub:{model_name}"


def estimate_rows(args: argparse.Namespace) -> list[Any]:
    """The estimate of ``args.model`` for each of ``args.dtypes``, one
    ``accel_bigmodel.MemoryEstimate`` per dtype.

    Raises:
        ConfigError: The model cannot be estimated offline (a Hub id, ``--library_name timm``),
            or its config is refused, with the fix.
    """
    if args.library_name == "timm":
        raise ConfigError(
            "accel estimate-memory builds transformers configs and 'package.module:Class' paths; "
            "got --library_name timm, which this version does not support. Pass "
            "'package.module:Class' for a class built with no arguments."
        )
    _check_model_argument(args.model)
    from accel_bigmodel import estimate_memory_from_config

    # A config of a family whose shapes follow from its fields answers without torch.
    try:
        exists = Path(args.model).exists()
        rows = estimate_memory_from_config(args.model, args.dtypes) if exists else None
    except ValueError as err:  # a count no model has, refused before anything is built
        raise ConfigError(str(err)) from None
    if rows is None:
        rows = _built_model_rows(args)
    return list(rows)


def _built_model_rows(args: argparse.Namespace) -> list[Any]:
    """The estimate of ``args.model`` built on the meta device (torch, maybe transformers)."""
    message = (
        f"accel estimate-memory: building {args.model} on the meta device (no weights; "
        "importing torch and transformers first takes a few seconds)"
    )
    try:
        with status(message), library_noise_silenced():
            from accel_bigmodel import estimate_memory

            built = _remote_code_model(args.model, args.trust_remote_code)
            return estimate_memory(args.model if built is None else built, dtypes=args.dtypes)
    except (FileNotFoundError, ImportError) as err:
        raise ConfigError(str(err)) from None
    except Exception as err:  # transformers (or the class) refuses the config
        config = _config_file(Path(args.model)) if Path(args.model).exists() else None
        if config is None:
            raise ConfigError(str(err)) from None
        cause = _innermost(err)
        text = " ".join(str(cause).split()) or type(cause).__name__
        raise ConfigError(
            f"transformers refuses the config {str(config)!r}: {text} Fix that field of the file."
        ) from None

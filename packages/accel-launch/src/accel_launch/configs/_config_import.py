"""Bringing a config file of the reference library (``accelerate``) into accel.

The reference keeps its default file at ``$HF_HOME/accelerate/default_config.yaml``, where
``HF_HOME`` defaults to ``$XDG_CACHE_HOME/huggingface`` (``~/.cache/huggingface``). When accel
has no config file of its own, ``accel config`` and ``accel launch`` say that such a file was
found, and ``accel config import`` validates it with accel's loader and writes it as accel's
default file.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .._errors import ConfigError
from ._config_file import LaunchConfig, config_from_dict, default_config_file, read_raw
from ._migrate import IGNORED_KEYS, migrate

__all__ = ["import_config", "reference_config_file", "reference_config_notice"]


def reference_config_file() -> Path:
    """Where the reference library keeps its default config file, honouring ``HF_HOME`` and
    ``XDG_CACHE_HOME`` as it does."""
    cache = os.environ.get("XDG_CACHE_HOME") or "~/.cache"
    hf_home = os.environ.get("HF_HOME") or os.path.join(cache, "huggingface")
    return Path(os.path.expanduser(hf_home)) / "accelerate" / "default_config.yaml"


def reference_config_notice(command: str) -> str | None:
    """The notice shown by ``accel <command>`` when accel has no default config file but the
    reference library has one; None otherwise."""
    if default_config_file().is_file():
        return None
    found = reference_config_file()
    if not found.is_file():
        return None
    return (
        f"accel {command}: accel has no config file yet ({default_config_file()}), but the "
        f"reference library's config file {found} exists. Run `accel config import` to check "
        "it and use it as accel's default config."
    )


def _is_off(value: Any) -> bool:
    """Whether a reference-only setting holds its "not used" value."""
    if isinstance(value, str):
        return value.strip().lower() in ("", "no", "false", "off", "none")
    if isinstance(value, dict):  # e.g. ipex_config: {ipex: false}
        return all(_is_off(item) for item in value.values())
    if isinstance(value, list):
        return all(_is_off(item) for item in value)
    return value is None or value is False or value == 0


def _refuse_set_reference_only_keys(data: dict[str, Any], source: str) -> None:
    """Refuse reference-only settings that hold a value: importing them would drop them."""
    set_keys = {
        key: value for key, value in data.items() if key in IGNORED_KEYS and not _is_off(value)
    }
    if set_keys:
        shown = ", ".join(f"{key}={value!r}" for key, value in sorted(set_keys.items()))
        raise ConfigError(
            f"{source}: settings that accel does not support must be off to be imported "
            f"(they would be lost); got {shown}. Delete these lines (or set them to false / "
            "empty) in a copy of the file and import the copy: accel config import COPY."
        )


def import_config(
    source: str | os.PathLike[str] | None = None,
    target: str | os.PathLike[str] | None = None,
    overwrite: bool = False,
) -> tuple[Path, LaunchConfig, list[str]]:
    """Validate a reference config file and write it as an accel config file.

    Nothing is written unless every setting is accepted.

    Args:
        source: The file to import (default: `reference_config_file`).
        target: Where to write (default: accel's default config file).
        overwrite: Replace an existing file at ``target``.

    Returns:
        The path written, the config, and what changed on the way (moved or renamed keys,
        dropped reference-only keys).

    Raises:
        ConfigError: When the source is missing or invalid, or the target exists.
    """
    src = Path(source) if source is not None else reference_config_file()
    dst = Path(target) if target is not None else default_config_file()
    if not src.is_file():
        raise ConfigError(
            f"accel config import reads an existing config file; {str(src)!r} does not exist. "
            "Pass the path of the file to import: accel config import PATH."
        )
    if dst.exists() and not overwrite:
        raise ConfigError(
            f"accel config import does not replace an existing config file; {str(dst)!r} "
            "exists. Pass --overwrite to replace it, or --config_file to write elsewhere."
        )
    raw = read_raw(src)
    if not isinstance(raw, dict):
        config_from_dict(raw, source=str(src))  # raises the loader's "mapping" error
    _refuse_set_reference_only_keys(raw, str(src))
    config = config_from_dict(raw, source=str(src))
    _, changes = migrate(raw)
    text = src.read_text()
    config.save(dst, comments_of=text if dst.suffix != ".json" else None)
    return dst, config, changes

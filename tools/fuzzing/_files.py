"""Helpers shared by the targets: seed folders written once, inputs applied to a copy."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

from .mutate import split_selected


def once(folder: Path, write: Callable[[Path], None]) -> Path:
    """``folder``, written by ``write`` unless a previous run already did (``.done`` marks it)."""
    if not (folder / ".done").exists():
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        write(folder)
        (folder / ".done").write_text("")
    return folder


def listed(folder: Path) -> list[Path]:
    """The files of a seed folder, in a stable order (the selector of a multi-file input)."""
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != ".done")


def fmt_of(path: Path) -> str:
    """The mutation format of a file, from its name."""
    if path.suffix == ".json":
        return "json"
    if path.suffix == ".safetensors":
        return "safetensors"
    if path.name == ".metadata":
        return "pickle"
    if path.suffix in (".yaml", ".yml"):
        return "yaml"
    return "bytes"


def multi_seeds(folder: Path) -> tuple[list[bytes], dict[int, str]]:
    """One seed per file of ``folder`` (selector byte + its bytes) and the format of each."""
    files = listed(folder)
    seeds = [bytes([i]) + f.read_bytes() for i, f in enumerate(files)]
    return seeds, {i: fmt_of(f) for i, f in enumerate(files)}


def apply(folder: Path, data: bytes, scratch: Path) -> Path:
    """A copy of ``folder`` in ``scratch`` with the file the input selects replaced by it."""
    files = listed(folder)
    which, body = split_selected(data)
    copy = scratch / folder.name
    shutil.copytree(folder, copy, ignore=shutil.ignore_patterns(".done"))
    target = copy / files[which % len(files)].relative_to(folder)
    target.write_bytes(body)
    return copy

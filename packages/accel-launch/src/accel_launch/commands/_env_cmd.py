"""``accel env``: versions, devices and the resolved config file, for bug reports.

Every version comes from the installed distributions' metadata, so the command answers without
importing torch (which takes seconds).
"""

from __future__ import annotations

import argparse
import importlib.machinery
import os
import platform
import re
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .._device_files import torch_version_source
from ..configs._config_file import default_config_file, load_config_file

ACCEL_DISTRIBUTIONS = (
    "accel-torch",
    "accel-state",
    "accel-collectives",
    "accel-data",
    "accel-bigmodel",
    "accel-pipeline",
    "accel-precision",
    "accel-trackers",
    "accel-launch",
)
"""Every package of accel, by distribution name: each is listed, installed or not."""

THIRD_PARTY = ("torch", "numpy", "safetensors", "pyyaml", "deepspeed", "transformers")
"""Other distributions listed when they are installed."""

NVIDIA_DRIVER = Path("/proc/driver/nvidia")


def nvidia_driver(root: Path = NVIDIA_DRIVER) -> str:
    """The NVIDIA kernel driver's version and GPU count, read from ``/proc`` (Linux)."""
    if platform.system() != "Linux":
        return f"not checked on {platform.system()}"
    try:
        text = (root / "version").read_text()
    except OSError:
        return f"none ({root} is absent)"
    found = re.search(r"Kernel Module\s+(\S+)", text)
    gpus = len(list((root / "gpus").iterdir())) if (root / "gpus").is_dir() else 0
    return f"{found.group(1) if found else 'unknown version'}, {gpus} GPU(s)"


def _installed(dist: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version  # for `accel env` only

    try:
        return version(dist)
    except PackageNotFoundError:
        return None


def as_accelerate_line() -> str:
    """Whether ``accel.install_as_accelerate()`` is on in this process, and which library an
    ``import accelerate`` gives."""
    on = any(getattr(finder, "accel_as_accelerate", False) for finder in sys.meta_path)
    spec = importlib.machinery.PathFinder.find_spec("accelerate")
    reference = f"the reference is installed at {spec.origin}" if spec else "no reference installed"
    if on:
        return f"on: `import accelerate` gives accel ({reference}, not used)"
    how = "set ACCEL_AS_ACCELERATE=1, or call accel.install_as_accelerate()"
    if spec:
        return f"off: `import accelerate` gives the reference ({reference}); to switch, {how}"
    return f"off ({reference}); to switch, {how}"


def machine_lines(meminfo: Path = Path("/proc/meminfo")) -> list[str]:
    """CPU count (all, and usable by this process) and total RAM, read without imports."""
    cores = os.cpu_count() or 0
    usable = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else cores
    ram = f"not read on {platform.system()}"
    if meminfo.is_file():
        found = re.search(r"^MemTotal:\s+(\d+) kB", meminfo.read_text(), re.MULTILINE)
        if found:
            ram = f"{int(found.group(1)) / 2**20:.1f} GiB"
    return [f"- CPUs: {cores} ({usable} usable by this process)", f"- RAM: {ram}"]


def torch_build() -> str:
    """Which accelerator the installed torch was built for, read from its ``version.py`` (torch
    is not imported)."""
    text = torch_version_source()
    if text is None:
        return "torch not installed"
    builds = []
    for name, label in (("cuda", "CUDA"), ("hip", "ROCm")):
        found = re.search(rf"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]+)['\"]", text, re.MULTILINE)
        if found:
            builds.append(f"{label} {found.group(1)}")
    return ", ".join(builds) if builds else "CPU only (no CUDA or ROCm build)"


def command_location(which: Callable[[str], str | None] = shutil.which) -> str:
    """Where the ``accel`` command is on ``PATH``, or ``Not found``."""
    return which("accel") or "Not found"


def env_info(
    config_file: str | None = None, which: Callable[[str], str | None] = shutil.which
) -> dict[str, Any]:
    """The report of ``accel env`` under the reference's keys, without importing torch.

    Args:
        config_file: The config file to show, or ``None`` for the default file (when it exists).
        which: Finds a command on ``PATH`` (``shutil.which``); the ``accel`` command is looked
            up with it.

    Returns:
        ``"`Accelerate` version"`` (accel's), ``"Platform"``, ``"`accelerate` bash location"``
        (the ``accel`` command's path, or ``Not found``), ``"Python version"``,
        ``"Numpy version"``, ``"PyTorch version"``, ``"PyTorch accelerator"`` (what torch was
        built for), ``"System RAM"`` and ``"`Accelerate` configs"`` (the config file's settings,
        or ``Not found``).

    Raises:
        ConfigError: ``config_file`` does not parse or holds invalid settings.
    """
    path = Path(config_file) if config_file else default_config_file()
    if config_file is not None or path.is_file():
        configs: Any = load_config_file(path).to_dict()
    else:
        configs = "Not found"
    ram = machine_lines()[1].removeprefix("- RAM: ")
    return {
        "`Accelerate` version": _installed("accel-torch") or _installed("accel-launch"),
        "Platform": platform.platform(),
        "`accelerate` bash location": command_location(which),
        "Python version": platform.python_version(),
        "Numpy version": _installed("numpy") or "not installed",
        "PyTorch version": _installed("torch") or "not installed",
        "PyTorch accelerator": torch_build(),
        "System RAM": ram,
        "`Accelerate` configs": configs,
    }


def env_command(args: argparse.Namespace) -> int:
    """Print the report; the config file's settings follow when there is one."""
    lines = [
        f"- platform: {platform.platform()}",
        f"- python: {platform.python_version()}",
        *machine_lines(),
        f"- NVIDIA driver: {nvidia_driver()}",
        f"- torch build: {torch_build()}",
        f"- accel command: {command_location()}",
    ]
    lines += [f"- {dist}: {_installed(dist) or 'not installed'}" for dist in ACCEL_DISTRIBUTIONS]
    lines += [f"- {d}: {v}" for d in THIRD_PARTY if (v := _installed(d)) is not None]
    lines.append(f"- accel as accelerate: {as_accelerate_line()}")
    path = Path(args.config_file) if args.config_file else default_config_file()
    lines.append(f"- config file: {path} ({'found' if path.is_file() else 'absent'})")
    print("\n".join(lines))
    if path.is_file():
        config = load_config_file(path)
        for key, value in config.to_dict().items():
            print(f"    {key}: {value}")
    return 0

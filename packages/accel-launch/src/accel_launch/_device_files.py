"""Whether this machine may have an accelerator, told from its device files (Linux), without
importing torch (which takes seconds).

``torch.cuda.is_available()`` needs a driver: NVIDIA's shows as ``/proc/driver/nvidia`` and
``/dev/nvidia*`` (``/dev/dxg`` under WSL), ROCm's as ``/dev/kfd``, and an Intel GPU as
``/dev/dri/renderD*`` (used by torch only when it is an XPU build). Where none is present,
torch would find no device either, so a CPU-only answer needs no import.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path


def torch_version_source() -> str | None:
    """The text of the installed torch's ``version.py`` (its build: CUDA, ROCm, XPU), found
    without importing torch; ``None`` when torch is not installed, ``""`` without that file.

    Read through the installed distribution's metadata (``importlib.metadata``, imported here:
    only ``accel env`` and machines with an Intel render device ask).
    """
    from importlib.metadata import PackageNotFoundError, distribution

    try:
        path = Path(str(distribution("torch").locate_file("torch/version.py")))
    except PackageNotFoundError:
        return None
    return path.read_text() if path.is_file() else ""


def _torch_has_xpu() -> bool:
    """Whether the installed torch is an XPU build."""
    text = torch_version_source() or ""
    return re.search(r"^xpu\s*(?::[^=]*)?=\s*['\"]", text, re.MULTILINE) is not None


def accelerator_device_files(root: Path = Path("/")) -> list[str] | None:
    """The device files of accelerators found under ``root``; None where they cannot be read
    (not Linux: only torch can tell).

    Args:
        root: The file-system root to look under (``/``; another folder in tests).

    Returns:
        The paths found, relative to ``root`` (empty: no accelerator driver on this machine).
    """
    if platform.system() != "Linux":
        return None
    patterns = ["proc/driver/nvidia", "dev/nvidia[0-9]*", "dev/dxg", "dev/kfd"]
    found: list[str] = []
    for pattern in patterns:
        found += sorted(str(path.relative_to(root)) for path in root.glob(pattern))
    render = sorted(str(path.relative_to(root)) for path in root.glob("dev/dri/renderD*"))
    if render and _torch_has_xpu():  # read torch's build only where such a device exists
        found += render
    return found

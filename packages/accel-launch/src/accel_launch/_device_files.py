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
from importlib.metadata import PackageNotFoundError, distribution
from pathlib import Path


def _torch_has_xpu() -> bool:
    """Whether the installed torch is an XPU build, read from its ``version.py``."""
    try:
        path = Path(str(distribution("torch").locate_file("torch/version.py")))
    except PackageNotFoundError:
        return False
    text = path.read_text() if path.is_file() else ""
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
    if _torch_has_xpu():
        patterns.append("dev/dri/renderD*")
    found: list[str] = []
    for pattern in patterns:
        found += sorted(str(path.relative_to(root)) for path in root.glob(pattern))
    return found

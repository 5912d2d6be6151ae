"""``tools/uv.sh`` installs uv where a machine has none, also with a Python that refuses pip
installs (PEP 668), as the README's fresh-machine commands and ``tools/test.sh`` need.

The refusing Python is a real one: a copy of this interpreter's executable beside its standard
library (linked, not copied) with an ``EXTERNALLY-MANAGED`` marker, as Debian and Ubuntu ship
it, and pip in its site-packages. uv comes from PyPI; the tests skip when PyPI cannot be
reached.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "tools" / "uv.sh"
OFFLINE = ("Could not find a version", "No matching distribution", "Failed to establish")


def _base_python() -> Path:
    """The interpreter of this environment's base installation (not the virtual env's)."""
    name = f"python{sys.version_info.major}.{sys.version_info.minor}"
    return Path(sys.base_prefix) / "bin" / name


def _managed_python(tmp: Path) -> Path:
    """A Python whose pip refuses to install: PEP 668's marker in its standard library."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    stdlib = Path(sysconfig.get_paths(vars={"base": sys.base_prefix})["stdlib"])
    prefix = tmp / "system-python"
    (prefix / "bin").mkdir(parents=True)
    python = prefix / "bin" / version
    shutil.copy2(_base_python(), python)
    lib = prefix / "lib" / version
    (lib / "site-packages").mkdir(parents=True)
    for entry in stdlib.iterdir():
        if entry.name not in ("site-packages", "test"):
            (lib / entry.name).symlink_to(entry)
    pip = stdlib / "site-packages" / "pip"
    if pip.is_dir():
        (lib / "site-packages" / "pip").symlink_to(pip)
    else:  # pip's wheel bundled with ensurepip, importable as a zip
        wheel = next((stdlib / "ensurepip" / "_bundled").glob("pip-*.whl"))
        (lib / "site-packages" / "bundled-pip.pth").write_text(f"{wheel}\n", encoding="utf-8")
    (lib / "EXTERNALLY-MANAGED").write_text(
        "[externally-managed]\nError=Use apt, or a virtual environment.\n", encoding="utf-8"
    )
    (prefix / "bin" / "python3").symlink_to(python.name)
    return prefix / "bin" / "python3"


def _run(python: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        "PATH": f"{python.parent}:/usr/bin:/bin",  # no uv on it
        "HOME": str(home),
        "PYTHON": str(python),
        "PIP_CACHE_DIR": os.environ.get("PIP_CACHE_DIR", str(Path.home() / ".cache" / "pip")),
        "PIP_DISABLE_PIP_VERSION_CHECK": "1",
    }
    result = subprocess.run(
        ["bash", str(SCRIPT), *args], env=env, capture_output=True, text=True, timeout=300
    )
    if result.returncode != 0 and any(word in result.stderr for word in OFFLINE):
        pytest.skip(f"PyPI cannot be reached: {result.stderr[-300:]}")
    return result


def test_the_simulated_system_python_refuses_pip(tmp_path: Path) -> None:
    python = _managed_python(tmp_path)
    refused = subprocess.run(
        [str(python), "-m", "pip", "install", "uv"], capture_output=True, text=True, timeout=120
    )
    assert refused.returncode != 0
    assert "externally-managed-environment" in refused.stderr


def test_uv_is_installed_beside_a_system_python(tmp_path: Path) -> None:
    python = _managed_python(tmp_path)
    result = _run(python, tmp_path / "home", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("uv "), result.stdout
    assert "managed by the system (PEP 668)" in result.stderr
    venv_uv = tmp_path / "home" / ".cache" / "accel" / "uv-venv" / "bin" / "uv"
    assert venv_uv.is_file()
    again = _run(python, tmp_path / "home", "--path")  # found, not installed again
    assert again.stdout.strip() == str(venv_uv) and again.stderr == ""


def test_uv_is_installed_with_pip_where_pip_may_install(tmp_path: Path) -> None:
    subprocess.run([str(_base_python()), "-m", "venv", str(tmp_path / "env")], check=True)
    python = tmp_path / "env" / "bin" / "python3"
    result = _run(python, tmp_path / "home", "--version")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("uv ")
    assert "PEP 668" not in result.stderr
    assert (tmp_path / "env" / "bin" / "uv").is_file()

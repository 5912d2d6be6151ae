"""Build the XLA test environment (torch 2.9 + torch_xla 2.9 + accel's packages) and run
``tests/xla`` in it on the CPU (``PJRT_DEVICE=CPU``).

torch_xla pins one torch release, which is not the workspace's, so the XLA tests run in their
own virtual environment, kept under ``~/.cache/accel/xla-venv`` and rebuilt only when its
inputs change (the pinned versions and every package's ``pyproject.toml``). accel's packages
are installed editable, so a change of code needs no rebuild; a checkout at another path (a
fresh clone) re-points them in seconds.

PyPI's torch wheel for Linux pulls the CUDA libraries (about 2.7 GB of downloads, kept by uv's
cache); they cannot be left out: torch refuses to import without them.

Usage:
    python tools/xla_env.py                 # build (or reuse) the venv, run tests/xla
    python tools/xla_env.py --build-only    # build (or reuse) the venv only
    python tools/xla_env.py -- -k launch    # extra pytest arguments after ``--``

Exit code 0 with a ``skipped:`` line when the package index cannot be reached.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PYTHON = "3.11"
PINS = ("torch==2.9.*", "torch-xla==2.9.0", "pytest>=8", "pytest-timeout>=2")
"""What the environment installs besides accel's packages."""
DEFAULT_VENV = Path.home() / ".cache" / "accel" / "xla-venv"
STAMP = "accel-xla-inputs.json"


def _packages() -> list[Path]:
    return sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())


def inputs_key() -> str:
    """Hash of everything the environment is built from (pins, Python, each pyproject)."""
    digest = hashlib.sha256()
    digest.update(json.dumps([PYTHON, *PINS]).encode())
    for package in _packages():
        digest.update(package.name.encode())
        digest.update((package / "pyproject.toml").read_bytes())
    return digest.hexdigest()


def _index_url() -> str:
    for name in ("UV_DEFAULT_INDEX", "UV_INDEX_URL", "PIP_INDEX_URL"):
        if os.environ.get(name):
            return os.environ[name].rstrip("/")
    return "https://pypi.org/simple"


def index_reachable(timeout: float = 20.0) -> tuple[bool, str]:
    """Whether the package index answers for torch-xla; the reason when it does not."""
    url = f"{_index_url()}/torch-xla/"
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            return response.status == 200, f"{url} answered {response.status}"
    except (urllib.error.URLError, OSError) as err:
        return False, f"{url} is unreachable ({err})"


def _python(venv: Path) -> Path:
    return venv / "bin" / "python"


def _uv() -> str:
    uv = shutil.which("uv")
    if uv is None:
        raise SystemExit(
            "xla_env: uv is needed to build the environment; got none on PATH. "
            "Install it with: python -m pip install uv"
        )
    return uv


def _install_editables(uv: str, venv: Path, *extra: str) -> None:
    """Install this checkout's packages editable into ``venv`` (with ``extra`` arguments)."""
    editables = [arg for package in _packages() for arg in ("-e", str(package))]
    # --no-config: the workspace's settings (its torch constraint) do not apply here.
    subprocess.run(
        [uv, "pip", "install", "--no-config", "--quiet", "--python", str(_python(venv))]
        + [*extra, *editables],
        check=True,
    )


def build(venv: Path) -> bool:
    """Create or reuse the environment; True when it was (re)built.

    A reused environment built from another checkout (another clone's path) has its editable
    installs pointed at this checkout again, without touching torch and torch_xla.
    """
    key = inputs_key()
    stamp = venv / STAMP
    if stamp.is_file() and _python(venv).exists():
        recorded = json.loads(stamp.read_text())
        if recorded.get("key") == key:
            if recorded.get("root") != str(ROOT):
                _install_editables(_uv(), venv, "--no-deps")
                stamp.write_text(json.dumps({**recorded, "root": str(ROOT)}))
            return False
    uv = _uv()
    if venv.exists():
        shutil.rmtree(venv)
    subprocess.run(
        [uv, "venv", "--no-config", "--quiet", "--python", PYTHON, str(venv)], check=True
    )
    _install_editables(uv, venv, *PINS)
    stamp.write_text(json.dumps({"key": key, "pins": PINS, "root": str(ROOT)}))
    return True


def test_env() -> dict[str, str]:
    """The environment the XLA tests run in: PJRT on the CPU, no metadata-server probing."""
    env = dict(os.environ)
    for name in ("VIRTUAL_ENV", "PYTHONPATH"):
        env.pop(name, None)
    env.update(PJRT_DEVICE="CPU", TPU_SKIP_MDS_QUERY="1", ACCEL_XLA_TEST_ENV="1")
    return env


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--venv", type=Path, default=Path(os.environ.get("ACCEL_XLA_VENV", DEFAULT_VENV))
    )
    parser.add_argument("--build-only", action="store_true")
    parser.add_argument("pytest_args", nargs="*")
    args = parser.parse_args(argv)

    start = time.monotonic()
    key_matches = (args.venv / STAMP).is_file() and json.loads((args.venv / STAMP).read_text()).get(
        "key"
    ) == inputs_key()
    if not key_matches:
        ok, reason = index_reachable()
        if not ok:
            print(f"skipped: the XLA environment needs torch and torch_xla from PyPI; {reason}.")
            return 0
    rebuilt = build(args.venv)
    print(
        f"xla_env: {'built' if rebuilt else 'reused'} {args.venv} in "
        f"{time.monotonic() - start:.0f}s"
    )
    if args.build_only:
        return 0
    command = [
        str(_python(args.venv)),
        "-m",
        "pytest",
        "tests/xla",
        "-q",
        "-p",
        "no:cacheprovider",
        *args.pytest_args,
    ]
    return subprocess.run(command, cwd=ROOT, env=test_env(), check=False).returncode


if __name__ == "__main__":
    sys.exit(main())

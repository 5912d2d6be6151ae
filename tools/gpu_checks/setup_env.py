"""Make the working tree's accel packages importable without installing them.

On a machine where nothing can be downloaded (the GPU machine), the packages' ``src`` folders
go on ``PYTHONPATH`` and this script writes, into a site folder also on it, what an install
would have written beside them: a ``.dist-info`` per package (``importlib.metadata`` reads each
package's version from it) and the ``accel`` / ``accel-launch`` commands. Carried wheels
(``build/gpu-wheels``) are installed into the same folder, without their dependencies.

Usage: python tools/gpu_checks/setup_env.py SITE_DIR BIN_DIR [WHEEL_DIR]
Prints the ``PYTHONPATH`` to export.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

try:
    import tomllib
except ImportError:  # Python 3.10
    tomllib = None  # type: ignore[assignment]

ROOT = Path(__file__).resolve().parents[2]


def _project(pyproject: Path) -> dict:
    if tomllib is None:
        raise SystemExit(
            f"reading {pyproject} needs Python >= 3.11 (tomllib); got {sys.version.split()[0]}. "
            "Run the check with a newer python3."
        )
    with open(pyproject, "rb") as handle:
        return tomllib.load(handle)["project"]


def write_dist_info(site: Path, bin_dir: Path) -> list[Path]:
    """One ``.dist-info`` per workspace package; console scripts into ``bin_dir``."""
    sources = []
    for pyproject in sorted(ROOT.glob("packages/*/pyproject.toml")):
        project = _project(pyproject)
        name, version = project["name"], project["version"]
        folder = site / f"{re.sub(r'[-.]+', '_', name)}-{version}.dist-info"
        folder.mkdir(parents=True, exist_ok=True)
        requires = "".join(f"Requires-Dist: {r}\n" for r in project.get("dependencies", []))
        (folder / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n{requires}",
            encoding="utf-8",
        )
        (folder / "INSTALLER").write_text("tools/gpu_checks/setup_env.py\n", encoding="utf-8")
        scripts = project.get("scripts", {})
        if scripts:
            lines = "".join(f"{k} = {v}\n" for k, v in scripts.items())
            (folder / "entry_points.txt").write_text(
                f"[console_scripts]\n{lines}", encoding="utf-8"
            )
        for command, target in scripts.items():
            module, function = target.split(":")
            script = bin_dir / command
            bin_dir.mkdir(parents=True, exist_ok=True)
            script.write_text(
                f"#!{sys.executable}\nimport sys\nfrom {module} import {function}\n"
                f"sys.exit({function}())\n",
                encoding="utf-8",
            )
            script.chmod(0o755)
        sources.append(pyproject.parent / "src")
    return sources


def install_wheels(site: Path, wheels: Path) -> None:
    """Installs every carried wheel into ``site`` (no index, no dependencies)."""
    found = sorted(wheels.glob("*.whl")) if wheels.is_dir() else []
    if not found:
        print(f"setup: no carried wheels in {wheels}", file=sys.stderr)
        return
    command = [sys.executable, "-m", "pip", "install", "-q", "--no-index", "--no-deps"]
    command += ["--no-compile", "--no-cache-dir", "--upgrade", "--target", str(site)]
    subprocess.run([*command, *map(str, found)], check=True)
    names = ", ".join(w.name.split("-")[0] + " " + w.name.split("-")[1] for w in found)
    print(f"setup: installed the carried wheels: {names}", file=sys.stderr)


def main() -> None:
    if len(sys.argv) not in (3, 4):
        raise SystemExit(__doc__)
    site, bin_dir = Path(sys.argv[1]), Path(sys.argv[2])
    site.mkdir(parents=True, exist_ok=True)
    if len(sys.argv) == 4:
        install_wheels(site, Path(sys.argv[3]))
    sources = write_dist_info(site, bin_dir)
    print(":".join(str(p) for p in [site, *sources]))


if __name__ == "__main__":
    main()

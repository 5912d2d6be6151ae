"""Install each package alone in a fresh virtual environment and run its own tests there.

A uv workspace cannot stop a member from importing a sibling it does not declare: this check
can. For each package: build every wheel once, create an empty venv, install only that package
(its declared dependencies come from the built wheels or PyPI), pytest and pytest-timeout, then
run the package's tests from a folder outside the source tree.

Usage: python tools/check_minimal_installs.py [package ...]
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"


def _uv() -> str:
    found = shutil.which("uv")
    if found is None:
        sys.exit("check_minimal_installs: uv is not on PATH; install it with `pip install uv`.")
    return found


def _constraints(workdir: Path) -> Path:
    text = (ROOT / "pyproject.toml").read_text()
    match = re.search(r"^constraint-dependencies = \[(.*?)\]", text, re.M | re.S)
    pins = re.findall(r'"([^"]+)"', match.group(1)) if match else []
    path = workdir / "constraints.txt"
    path.write_text("\n".join(pins) + "\n")
    return path


def _run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, text=True, capture_output=True, **kwargs)  # type: ignore[call-overload]


def _local_closure(package: str, wheels_by_name: dict[str, Path]) -> list[str]:
    """``package`` and every workspace package it depends on, directly or not."""
    seen: list[str] = []
    todo = [package]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        text = (PACKAGES / name / "pyproject.toml").read_text()
        deps = re.search(r"^dependencies = \[(.*?)\]", text, re.M | re.S)
        for req in re.findall(r'"([^"]+)"', deps.group(1) if deps else ""):
            dep = re.split(r"[<>=!~\[; ]", req, maxsplit=1)[0]
            if dep in wheels_by_name:
                todo.append(dep)
    return seen


def check(
    package: str, wheels_by_name: dict[str, Path], constraints: Path, workdir: Path
) -> tuple[bool, str]:
    """Return (ok, summary) for one package."""
    uv = _uv()
    venv = workdir / f"venv-{package}"
    python = venv / "bin" / "python"
    _run([uv, "venv", "--quiet", "--python", sys.executable, str(venv)], check=True)
    # Local wheels are passed by path: a name alone could resolve to an unrelated project of
    # the same name on the package index.
    local = [str(wheels_by_name[name]) for name in _local_closure(package, wheels_by_name)]
    install = _run(
        [
            uv,
            "pip",
            "install",
            "--quiet",
            "--python",
            str(python),
            "--constraint",
            str(constraints),
            *local,
            "pytest>=8",
            "pytest-timeout>=2.3",
        ]
    )
    if install.returncode != 0:
        return False, f"install failed:\n{install.stderr}"
    tests = PACKAGES / package / "tests"
    if not any(tests.glob("test_*.py")):
        return True, "installed; no tests yet"
    run_dir = workdir / f"run-{package}"
    run_dir.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["ACCEL_MINIMAL_INSTALL"] = package
    result = _run(
        [
            str(python),
            "-m",
            "pytest",
            str(tests),
            "-q",
            "-p",
            "no:cacheprovider",
            # Soak tests (marked slow) already ran in the workspace suite.
            "-m",
            "not slow",
            "--import-mode=importlib",
            "--rootdir",
            str(run_dir),
            "-c",
            os.devnull,
        ],
        cwd=run_dir,
        env=env,
    )
    last = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    if result.returncode not in (0, 5):
        return False, f"tests failed: {last}\n{result.stdout[-4000:]}\n{result.stderr[-2000:]}"
    return True, last


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", help="Packages to check (default: all).")
    args = parser.parse_args()
    names = args.packages or sorted(p.name for p in PACKAGES.iterdir() if p.is_dir())
    failures = 0
    with tempfile.TemporaryDirectory(prefix="accel-minimal-") as tmp:
        workdir = Path(tmp)
        wheels = workdir / "wheels"
        build = _run(
            [_uv(), "build", "--quiet", "--all-packages", "--wheel", "-o", str(wheels)], cwd=ROOT
        )
        if build.returncode != 0:
            print(build.stderr)
            return 1
        constraints = _constraints(workdir)
        wheels_by_name = {
            path.name.split("-")[0].replace("_", "-"): path for path in wheels.glob("*.whl")
        }
        for name in names:
            start = time.perf_counter()
            ok, summary = check(name, wheels_by_name, constraints, workdir)
            failures += not ok
            status = "ok  " if ok else "FAIL"
            print(f"{status} {name:<18} {time.perf_counter() - start:5.1f}s  {summary}", flush=True)
    print(f"minimal installs: {len(names) - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

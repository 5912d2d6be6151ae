"""Run the reference library's own CPU test suite (accelerate 1.15.0, ``tests/``) on accel.

Downloads the reference's source distribution once (checked against its sha256), then runs its
``tests/`` with every ``accelerate.*`` import served by accel (``site/sitecustomize.py``
installs the finder of ``_hook.py`` in pytest and in every process it starts). A test that
fails or errors and is not listed in ``expected_failures.txt`` fails the run; so does a listed
test that passes (the list can only shrink: take it out).

Usage:
    uv run --no-sync python tests/parity/reference_suite/run.py [--reference] [-- PYTEST ARGS]

``--reference`` runs the same suite on the reference itself (no finder), to see which tests
pass there. The summary's last line reads ``N passed, N failed``.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import xml.etree.ElementTree as ET
from pathlib import Path

HERE = Path(__file__).resolve().parent
VERSION = "1.15.0"
SDIST = f"accelerate-{VERSION}.tar.gz"
SHA256 = "5654f8c5eaa0d4fa68b33e287a97765da6849bf6d51dcac874e73fbbddfb6134"
CACHE = Path(
    os.environ.get("ACCEL_REFERENCE_SUITE_CACHE", Path.home() / ".cache/accel/reference-suite")
)
EXPECTED = HERE / "expected_failures.txt"
TIMEOUT_S = 300


def _download(dest: Path) -> Path:
    """Fetch the sdist with pip (the system's, or one run by uv) into ``dest``."""
    dest.mkdir(parents=True, exist_ok=True)
    target = dest / SDIST
    if target.exists():
        return target
    args = [
        "download",
        "--no-binary",
        ":all:",
        "--no-deps",
        f"accelerate=={VERSION}",
        "-d",
        str(dest),
    ]
    python = shutil.which("python3") or sys.executable
    commands = [[python, "-m", "pip", *args], ["uv", "tool", "run", "pip", *args]]
    for command in commands:
        if (
            subprocess.run(command, check=False, capture_output=True).returncode == 0
            and target.exists()
        ):
            return target
    raise SystemExit(
        f"could not download {SDIST}: tried {[c[:3] for c in commands]}; download it into {dest}"
    )


def source_tree() -> Path:
    """The extracted sdist (``src/`` and ``tests/``), downloaded and checked on first use."""
    root = CACHE / f"accelerate-{VERSION}"
    if (root / "tests").is_dir():
        return root
    sdist = _download(CACHE)
    digest = hashlib.sha256(sdist.read_bytes()).hexdigest()
    if digest != SHA256:
        sdist.unlink()
        raise SystemExit(f"{sdist} has sha256 {digest}, expected {SHA256}: removed it, run again")
    with tarfile.open(sdist) as archive:
        archive.extractall(CACHE, filter="data")
    return root


def read_expected() -> dict[str, str]:
    """Test ids of ``expected_failures.txt`` (``id  # reason`` per line) with their reasons."""
    expected: dict[str, str] = {}
    for line in EXPECTED.read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        test_id, _, reason = line.partition("#")
        expected[test_id.strip()] = reason.strip()
    return expected


def outcomes(junit: Path) -> dict[str, str]:
    """``file::Class::test`` -> passed / failed / skipped, from pytest's junit XML."""
    result: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        # classname is ``tests.test_x.Class`` or ``tests.test_x``; empty for a module that
        # could not be collected, whose dotted name is then the case's name.
        classname = case.get("classname", "")
        name = case.get("name", "")
        if classname:
            parts = classname.split(".")
            test_id = "::".join(["/".join(parts[:2]) + ".py", *parts[2:], name])
        else:
            test_id = name.replace(".", "/") + ".py"
        state = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                state = "failed"
            elif child.tag == "skipped":
                state = "skipped"
        result[test_id] = state
    return result


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reference", action="store_true", help="run on the reference itself")
    parser.add_argument("pytest_args", nargs="*", help="passed to pytest (after --)")
    options = parser.parse_args()
    root = source_tree()
    env = dict(os.environ)
    env["PYTHONPATH"] = str(HERE / "site")  # the exit plugin; the finder too, below
    env.pop("ACCEL_REFERENCE_SRC", None)
    if not options.reference:
        env["ACCEL_REFERENCE_SRC"] = str(root / "src")
    with tempfile.TemporaryDirectory() as tmp:
        junit = Path(tmp) / "junit.xml"
        ini = Path(tmp) / "pytest.ini"
        ini.write_text(f"[pytest]\ntimeout = {TIMEOUT_S}\n")
        command = [
            sys.executable,
            "-m",
            "pytest",
            "-c",
            str(ini),
            "--rootdir",
            str(root),
            "-q",
            "-p",
            "no:cacheprovider",
            "-p",
            "reference_suite_exit",
            "--continue-on-collection-errors",
            f"--junitxml={junit}",
            "-o",
            "junit_family=xunit2",
            *(options.pytest_args or ["tests"]),
        ]
        subprocess.run(command, cwd=root, env=env, check=False)
        results = outcomes(junit)
    passed = sorted(t for t, s in results.items() if s == "passed")
    failed = sorted(t for t, s in results.items() if s == "failed")
    if options.reference or options.pytest_args:
        print(f"\n{len(passed)} passed, {len(failed)} failed")
        for test_id in failed:
            print(f"FAILED {test_id}")
        return 0
    expected = read_expected()
    unexpected = [t for t in failed if t not in expected]
    fixed = [t for t in passed if t in expected]
    for test_id in unexpected:
        print(f"FAILED (not in expected_failures.txt) {test_id}")
    for test_id in fixed:
        print(f"PASSED (listed in expected_failures.txt: take it out) {test_id}")
    print(f"\nreference suite on accel: {len(expected)} listed as expected failures")
    print(f"{len(passed)} passed, {len(unexpected) + len(fixed)} failed")
    return 1 if unexpected or fixed else 0


if __name__ == "__main__":
    raise SystemExit(main())

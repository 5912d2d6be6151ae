"""Install each package alone in a fresh virtual environment, run it, then run its own tests there.

A uv workspace cannot stop a member from importing a sibling it does not declare, and a test
dependency can hide a runtime dependency the package forgot to declare: this check catches both.
For each package and each job:

1. create an empty venv and install only the package (built wheels of it and of the workspace
   packages it declares; the rest from the package index);
2. with nothing else installed, import it, run its smoke script ``tools/smoke/<package>.py`` and
   every script in ``packages/<package>/examples/``;
3. install pytest, pytest-timeout and the package's ``test`` dependency group, constrained to the
   versions already installed (a test dependency may add packages, never change one), and run
   the package's tests from a folder outside the source tree. In the lowest job only, a test
   dependency that needs newer releases than the lowest ones is left out (the summary names it)
   and the tests run with the rest of the group.

Jobs:

- regular (default): the newest versions the declared ranges allow, with the workspace's
  constraints (``torch==2.13.0``), on each Python of ``--pythons`` (default: this one);
- ``--lowest``: every direct dependency of the package, of the workspace packages it pulls in
  and of each of its extras at the lowest version its declared range allows
  (``uv pip install --resolution lowest-direct``), extras installed, on this Python. Indirect
  dependencies resolve to their newest versions, as ``pip install`` would give a user who pins
  only our lower bounds. Every extra is installed in this job because their ranges are
  declared too.

Usage:
    python tools/check_minimal_installs.py [package ...]
    python tools/check_minimal_installs.py --pythons 3.10,3.12 --lowest accel-bigmodel accel-trackers

``--pythons`` lists the Pythons of the regular job (found on PATH as ``pythonX.Y`` or under
``~/.pyenv/versions``); with ``--lowest`` and no ``--pythons`` only the lowest job runs.
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
from collections.abc import Callable, Container
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from pathlib import Path

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    sys.exit("check_minimal_installs: run it with Python >= 3.11 (it reads pyproject.toml).")

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ROOT / "packages"
SMOKE = ROOT / "tools" / "smoke"
# A smoke script or an example that runs longer than this fails the job.
SCRIPT_TIMEOUT = 900
# uv reads pyproject.toml of the folder it runs in: the workspace's [tool.uv] constraints
# (torch==2.13.0) would silently apply to every install, the lowest job included.
NO_CONFIG = ["--quiet", "--no-config"]
# The pytest plugin that records passed tests (--record-passed) and the variable it reads.
PLUGINS = ROOT / "tools" / "pytest_plugins"
RECORD_PASSED = "ACCEL_RECORD_PASSED"
TESTS_TIMEOUT = 3600


@dataclass(frozen=True)
class Job:
    """One environment to build: a Python and a resolution strategy."""

    python: str
    lowest: bool = False

    @property
    def label(self) -> str:
        version = _python_version(self.python)
        return f"lowest py{version}" if self.lowest else f"py{version}"


def _uv() -> str:
    found = shutil.which("uv")
    if found is None:
        sys.exit("check_minimal_installs: uv is not on PATH; install it with `pip install uv`.")
    return found


def _run(
    command: list[str], timeout: float | None = None, **kwargs: object
) -> subprocess.CompletedProcess[str]:
    try:
        return subprocess.run(  # type: ignore[call-overload,no-any-return]
            command, text=True, capture_output=True, timeout=timeout, **kwargs
        )
    except subprocess.TimeoutExpired as err:
        out = err.stdout.decode() if isinstance(err.stdout, bytes) else (err.stdout or "")
        return subprocess.CompletedProcess(command, 124, out, f"timed out after {timeout}s")


def _python_version(python: str) -> str:
    out = _run([python, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    return out.stdout.strip() or "?"


def find_python(version: str) -> str:
    """The interpreter for ``version`` ("3.12"): ``python3.12`` on PATH, else pyenv's."""
    if not re.fullmatch(r"3\.\d+", version):
        sys.exit(
            f"check_minimal_installs: --pythons takes versions like 3.10,3.12; got {version!r}. "
            "Pass major.minor numbers separated by commas."
        )
    found = shutil.which(f"python{version}")
    if found and _python_version(found) == version:
        return found
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = sorted(pyenv.glob(f"{version}.*/bin/python{version}"), reverse=True)
    if candidates:
        return str(candidates[0])
    sys.exit(
        f"check_minimal_installs: no Python {version} found (looked for python{version} on PATH "
        f"and in {pyenv}). Install it (e.g. `pyenv install {version}`) or drop it from --pythons."
    )


def _pyproject(package: str) -> dict:
    return tomllib.loads((PACKAGES / package / "pyproject.toml").read_text())


def _name(requirement: str) -> str:
    return re.split(r"[<>=!~\[; @]", requirement.strip(), maxsplit=1)[0].lower()


@cache
def folders_by_distribution() -> dict[str, str]:
    """Each workspace distribution name -> its folder under ``packages/``.

    The two differ for the meta-package only (distribution ``accel-torch``, folder ``accel``).
    """
    return {
        tomllib.loads((path / "pyproject.toml").read_text())["project"]["name"]: path.name
        for path in sorted(PACKAGES.iterdir())
        if (path / "pyproject.toml").is_file()
    }


def distribution(package: str) -> str:
    """The distribution name of the package in folder ``packages/<package>``."""
    return str(_pyproject(package)["project"]["name"])


def _workspace(requirement: str) -> str | None:
    """The folder of the workspace package a requirement names, None for a third-party one."""
    return folders_by_distribution().get(_name(requirement))


def wheels_in(folder: Path) -> dict[str, Path]:
    """The workspace wheels built into ``folder``, by package folder name."""
    folders = folders_by_distribution()
    found = {}
    for path in folder.glob("*.whl"):
        dist = path.name.split("-")[0].replace("_", "-").lower()
        if dist in folders:
            found[folders[dist]] = path
    return found


def workspace_constraints() -> list[str]:
    """The root ``[tool.uv] constraint-dependencies`` (``torch==2.13.0``)."""
    root = tomllib.loads((ROOT / "pyproject.toml").read_text())
    return list(root["tool"]["uv"].get("constraint-dependencies", []))


def local_closure(package: str, wheels_by_name: Container[str]) -> list[str]:
    """``package`` and every workspace package among ``wheels_by_name`` it depends on,
    directly or not."""
    seen: list[str] = []
    todo = [package]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.append(name)
        for req in _pyproject(name)["project"].get("dependencies", []):
            folder = _workspace(req)
            if folder is not None and folder in wheels_by_name:
                todo.append(folder)
    return seen


def _as_wheel(requirement: str, wheels_by_name: dict[str, Path]) -> str:
    """A requirement on a workspace package points at its built wheel (keeping its extras):
    a name alone could resolve to an unrelated project of the same name on the index."""
    folder = _workspace(requirement)
    if folder is None or folder not in wheels_by_name:
        return requirement
    extras = re.search(r"\[[^\]]*\]", requirement)
    wheel = wheels_by_name[folder].as_uri()
    return f"{distribution(folder)}{extras.group(0) if extras else ''} @ {wheel}"


def runtime_requirements(package: str, job: Job, wheels_by_name: dict[str, Path]) -> list[str]:
    """What ``pip install <package>`` asks for in this job."""
    local = local_closure(package, wheels_by_name)
    if not job.lowest:
        return [str(wheels_by_name[name]) for name in local]
    project = _pyproject(package)["project"]
    extras = sorted(project.get("optional-dependencies", {}))
    own = distribution(package) + (f"[{','.join(extras)}]" if extras else "")
    requirements = [_as_wheel(own, wheels_by_name)]
    requirements += [str(wheels_by_name[name]) for name in local if name != package]
    # Direct requirements are what lowest-direct lowers: list each declared range explicitly.
    for name in local:
        meta = _pyproject(name)["project"]
        declared = list(meta.get("dependencies", []))
        if name == package:
            declared += [r for reqs in meta.get("optional-dependencies", {}).values() for r in reqs]
        requirements += [r for r in declared if _workspace(r) is None]
    return requirements


def test_requirements(package: str, wheels_by_name: dict[str, Path]) -> list[str]:
    """pytest, pytest-timeout and the package's ``test`` dependency group."""
    group = _pyproject(package).get("dependency-groups", {}).get("test", [])
    for entry in group:
        if not isinstance(entry, str):
            sys.exit(
                f"check_minimal_installs: the test group of {package} holds {entry!r}; this "
                "check reads plain requirement strings only. Inline the included group."
            )
    return ["pytest>=8", "pytest-timeout>=2.3", *(_as_wheel(r, wheels_by_name) for r in group)]


def _env(package: str, workdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("VIRTUAL_ENV", "PYTHONPATH")}
    env["ACCEL_MINIMAL_INSTALL"] = package
    env["ACCEL_CONFIG_HOME"] = str(workdir / "config")  # never read the user's config file
    return env


def _scripts(package: str) -> list[Path]:
    smoke = SMOKE / f"{package}.py"
    examples = sorted((PACKAGES / package / "examples").glob("*.py"))
    return ([smoke] if smoke.is_file() else []) + examples


def _freeze(uv: str, python: Path, path: Path, extra: list[str]) -> Path:
    """Constraints that keep every installed package (but our own wheels) at its version."""
    frozen = _run([uv, "pip", "freeze", "--python", str(python)], check=True).stdout
    pins = [line for line in frozen.splitlines() if " @ " not in line and "==" in line]
    path.write_text("\n".join([*extra, *pins]) + "\n")
    return path


def check(
    package: str,
    job: Job,
    wheels_by_name: dict[str, Path],
    constraints: list[str],
    root: Path,
    record_passed: Path | None = None,
    progress: Callable[[str], None] | None = None,
) -> tuple[bool, str]:
    """Return (ok, summary) for one package in one job.

    ``progress`` gets one line as each step starts (the release tool prints them).

    With ``record_passed``, the tests that pass are appended to that file (see
    ``tools/pytest_plugins/accel_run_once.py``) so the workspace suite need not run them again.
    """
    say = progress or (lambda line: None)
    uv = _uv()
    slug = f"{package}-{job.label.replace(' ', '-')}"
    workdir = root / slug
    workdir.mkdir()
    venv = workdir / "venv"
    python = venv / "bin" / "python"
    _run([uv, "venv", "--quiet", "--python", job.python, str(venv)], check=True)
    base = workdir / "constraints.txt"
    base.write_text("\n".join(constraints) + "\n")
    resolution = ["--resolution", "lowest-direct"] if job.lowest else ["--constraint", str(base)]
    requirements = runtime_requirements(package, job, wheels_by_name)
    say(f"installing {package} and its runtime dependencies in a fresh environment ({venv})")
    install = _run(
        [uv, "pip", "install", *NO_CONFIG, "--python", str(python), *resolution, *requirements]
    )
    if install.returncode != 0:
        return False, f"install failed:\n{install.stderr[-4000:]}"
    env = _env(package, workdir)
    run_dir = workdir / "run"
    run_dir.mkdir()
    module = package.replace("-", "_")
    # -I keeps the script's own folder off sys.path (tools/smoke/accel.py would hide `accel`).
    say(f"importing {module}, then running its {len(_scripts(package))} smoke and example scripts")
    for script in [None, *_scripts(package)]:
        command = [
            str(python),
            "-I",
            *(["-c", f"import {module}"] if script is None else [str(script)]),
        ]
        result = _run(command, timeout=SCRIPT_TIMEOUT, cwd=run_dir, env=env)
        if result.returncode != 0:
            what = f"import {module}" if script is None else script.relative_to(ROOT)
            return False, (
                f"{what} failed with only the package installed (a runtime dependency it does "
                f"not declare?):\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
            )
    versions = _versions(uv, python, package, wheels_by_name)
    tests = PACKAGES / package / "tests"
    if not any(tests.glob("test_*.py")):
        return True, f"{versions}; {len(_scripts(package))} scripts ran; no tests yet"
    frozen = _freeze(uv, python, workdir / "frozen.txt", [] if job.lowest else constraints)
    pinned = [uv, "pip", "install", *NO_CONFIG, "--python", str(python), "-c", str(frozen)]
    note = ""
    say("installing the test dependencies")
    install = _run([*pinned, *test_requirements(package, wheels_by_name)])
    if install.returncode != 0 and job.lowest:
        # A test dependency may need a newer release than our lowest bound (transformers needs
        # safetensors > 0.4.0): the runtime versions stay, the tests run with the rest of the
        # group and the summary names what was left out (tests that need it skip with their
        # reason).
        reason = next((ln.strip() for ln in install.stderr.splitlines() if "depend" in ln), "")
        base = test_requirements(package, wheels_by_name)[:2]
        kept: list[str] = []
        left: list[str] = []
        for requirement in test_requirements(package, wheels_by_name)[2:]:
            trial = _run([*pinned, *base, *kept, requirement])
            (kept if trial.returncode == 0 else left).append(requirement)
        note = f"; left out of the test group on the lowest versions: {', '.join(left)} ({reason})"
        install = _run([*pinned, *base, *kept])
    if install.returncode != 0:
        return False, (
            "the test group cannot be installed without changing a runtime version:\n"
            f"{install.stderr[-4000:]}"
        )
    test_env = dict(env)
    recorder: list[str] = []
    if record_passed is not None:
        test_env["PYTHONPATH"] = str(PLUGINS)
        test_env[RECORD_PASSED] = str(record_passed)
        recorder = ["-p", "accel_run_once"]
    say(f"running the tests of packages/{package}/tests (pytest, a few minutes)")
    result = _run(
        [
            str(python),
            "-m",
            "pytest",
            *recorder,
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
        timeout=TESTS_TIMEOUT,
        cwd=run_dir,
        env=test_env,
    )
    last = (result.stdout.strip().splitlines() or ["(no output)"])[-1]
    if result.returncode not in (0, 5):
        # The failures first (the warnings summary that follows them would fill a plain tail).
        failures = result.stdout.find("= FAILURES =")
        shown = result.stdout[failures : failures + 8000] if failures >= 0 else ""
        tail = f"{result.stdout[-1500:]}\n{result.stderr[-2000:]}"
        return False, f"tests failed: {last}\n{shown}\n...\n{tail}"
    return True, f"{versions}; {len(_scripts(package))} scripts ran; {last}{note}"


def _versions(uv: str, python: Path, package: str, wheels_by_name: dict[str, Path]) -> str:
    """The installed versions of the third-party packages the job's packages declare."""
    wanted = set()
    for name in local_closure(package, wheels_by_name):
        meta = _pyproject(name)["project"]
        declared = [*meta.get("dependencies", [])]
        declared += [r for reqs in meta.get("optional-dependencies", {}).values() for r in reqs]
        wanted |= {_name(r) for r in declared if _workspace(r) is None}
    frozen = _run([uv, "pip", "freeze", "--python", str(python)]).stdout.splitlines()
    pins = [line for line in frozen if line.split("==")[0].lower() in wanted]
    return ", ".join(pins) if pins else "no third-party dependency"


# The packages whose checks took longest (accel-launch about 5 min, accel 4, accel-trackers 2.5,
# the rest 1-1.5 on two busy cores), started first: with --jobs 2 the step ends about 1.5 min
# sooner than in alphabetical order, where accel-launch started seventh.
LONGEST_FIRST = ("accel-launch", "accel", "accel-trackers", "accel-bigmodel")


def start_order(name: str) -> tuple[int, str]:
    """Sort key: the longest checks first, then the others by name."""
    rank = LONGEST_FIRST.index(name) if name in LONGEST_FIRST else len(LONGEST_FIRST)
    return rank, name


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("packages", nargs="*", help="Packages to check (default: all).")
    parser.add_argument(
        "--pythons",
        help="Comma-separated Python versions of the regular job (default: this Python).",
    )
    parser.add_argument(
        "--lowest",
        action="store_true",
        help="Run the lowest-direct job (on this Python) for each package.",
    )
    parser.add_argument(
        "--record-passed",
        type=Path,
        metavar="FILE",
        help="Append the tests that pass in the regular job on this Python to FILE, for the "
        "workspace suite to leave out (ACCEL_SKIP_PASSED).",
    )
    parser.add_argument(
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="Check N packages at a time, each in its own venv (default 1). Installs and test "
        "start-ups leave cores idle; results print as each check ends.",
    )
    args = parser.parse_args()
    every = sorted(p.name for p in PACKAGES.iterdir() if p.is_dir())
    names = sorted(args.packages or every, key=start_order)
    unknown = sorted(set(names) - set(every))
    if unknown:
        parser.error(f"unknown packages {unknown}; the packages are {every}")
    if args.pythons:
        pythons = [find_python(v.strip()) for v in args.pythons.split(",") if v.strip()]
    else:
        pythons = [] if args.lowest else [sys.executable]
    jobs = [Job(p) for p in pythons] + ([Job(sys.executable, lowest=True)] if args.lowest else [])
    if args.jobs < 1:
        parser.error(f"--jobs must be 1 or more, got {args.jobs}")
    with tempfile.TemporaryDirectory(prefix="accel-minimal-") as tmp:
        workdir = Path(tmp)
        wheels = workdir / "wheels"
        build = _run(
            [_uv(), "build", "--quiet", "--all-packages", "--wheel", "-o", str(wheels)], cwd=ROOT
        )
        if build.returncode != 0:
            print(build.stderr)
            return 1
        constraints = workspace_constraints()
        wheels_by_name = wheels_in(wheels)

        def one(job: Job, name: str) -> bool:
            start = time.perf_counter()
            here = not job.lowest and _python_version(job.python) == _python_version(sys.executable)
            record = args.record_passed if here else None
            ok, summary = check(name, job, wheels_by_name, constraints, workdir, record)
            status = "ok  " if ok else "FAIL"
            elapsed = time.perf_counter() - start
            print(f"{status} {name:<18} {job.label:<14} {elapsed:6.1f}s  {summary}", flush=True)
            return ok

        with ThreadPoolExecutor(max_workers=args.jobs) as pool:
            passed = list(pool.map(lambda pair: one(*pair), [(j, n) for j in jobs for n in names]))
        runs, failures = len(passed), passed.count(False)
    print(f"minimal installs: {runs - failures} passed, {failures} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

"""Release one package: bump its version, build its changelog, build, check and test it alone.

Usage:
    python tools/release.py accel-bigmodel 0.2.0             # bump, changelog, build, check, test
    python tools/release.py accel-bigmodel minor --dry-run   # the same on a copy; prints the notes
    python tools/release.py --tag accel-bigmodel-v0.2.0 --out dist   # CI: check a tagged commit

A package is named by its distribution (``accel-torch``) or its folder (``packages/accel``); the
version is ``X.Y.Z`` or ``patch`` / ``minor`` / ``major`` (the next one after the current).
Steps:

1. the new version must be newer than the current one, and every sibling that depends on the
   package must accept it through its declared range (``accel-state>=0.1,<0.2``);
2. the version in ``packages/<folder>/pyproject.toml`` is bumped (and in ``uv.lock``);
3. the news fragments of ``packages/<folder>/changes/`` become a section of its CHANGELOG.md
   (``towncrier build``; ``--draft`` in a dry run);
4. ``uv build --package`` builds the package's sdist and wheel, and a wheel of each workspace
   package it depends on; ``twine check`` checks the package's files;
5. a fresh virtual environment gets the package's wheel with its siblings' wheels from the same
   build (never from the package index), and runs the package's smoke script, examples and
   tests there (``tools/check_minimal_installs.py``'s job).

A dry run does all of it on a copy of the workspace and leaves the tree untouched. ``--tag``
releases nothing: it checks that the tag names the version in the package's pyproject, then
runs steps 1, 4 and 5 and leaves the package's sdist and wheel in ``--out`` for publishing.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import tomllib
from check_minimal_installs import (
    ROOT,
    Job,
    check,
    distribution,
    folders_by_distribution,
    local_closure,
    wheels_in,
    workspace_constraints,
)
from packaging.requirements import Requirement
from packaging.version import InvalidVersion, Version

# What a dry run copies: enough of the workspace for uv to build any member.
WORKSPACE_FILES = ("pyproject.toml", "uv.lock", "towncrier.toml", "README.md")
VERSION_LINE = re.compile(r'^version = "([^"]+)"$', re.MULTILINE)
# hatchling writes Metadata-Version 2.5, which the workspace's twine cannot read: its packaging
# is held below 25 by a tracker backend (aim). twine runs in its own environment instead.
TWINE = ["uvx", "--from", "twine>=6.2", "--with", "packaging>=26", "twine"]
# A CHANGELOG section written by hand before fragments existed: `## 0.1.0 (unreleased)`.
HANDWRITTEN = "## {version} (unreleased)"


class ReleaseError(Exception):
    """A release step refused: the message states the rule, the value and the fix."""


def resolve_package(name: str) -> str:
    """The folder under ``packages/`` of a package named by distribution or folder."""
    folders = folders_by_distribution()
    if name in folders:
        return folders[name]
    if name in folders.values():
        return name
    raise ReleaseError(
        f"a package is named by its distribution or its folder; got {name!r}. "
        f"Use one of {sorted(folders)}."
    )


def current_version(pyproject: Path) -> Version:
    """The static ``version`` of a package's pyproject.toml."""
    return Version(tomllib.loads(pyproject.read_text())["project"]["version"])


def next_version(current: Version, wanted: str) -> Version:
    """``wanted`` as a version: ``X.Y.Z``, or ``patch`` / ``minor`` / ``major`` after ``current``."""
    major, minor, patch = (current.release + (0, 0))[:3]
    bumps = {
        "patch": f"{major}.{minor}.{patch + 1}",
        "minor": f"{major}.{minor + 1}.0",
        "major": f"{major + 1}.0.0",
    }
    try:
        new = Version(bumps.get(wanted, wanted))
    except InvalidVersion:
        raise ReleaseError(
            f"the new version is X.Y.Z or patch / minor / major; got {wanted!r}. "
            f"Pass for example {bumps['patch']}."
        ) from None
    if new < current:
        raise ReleaseError(
            f"the new version must not be older than the current one ({current}); got {new}. "
            f"Pass {current} (first release of it) or newer, e.g. {bumps['patch']}."
        )
    return new


def sibling_range_errors(dist: str, version: Version, packages: Path) -> list[str]:
    """Every sibling whose declared range on ``dist`` leaves ``version`` out, as a sentence."""
    errors = []
    for folder in sorted(folders_by_distribution().values()):
        meta = tomllib.loads((packages / folder / "pyproject.toml").read_text())["project"]
        declared = list(meta.get("dependencies", []))
        declared += [r for reqs in meta.get("optional-dependencies", {}).values() for r in reqs]
        for line in declared:
            requirement = Requirement(line)
            if requirement.name.lower() != dist:
                continue
            if not requirement.specifier.contains(version, prereleases=True):
                errors.append(
                    f"{meta['name']} requires {line!r}, which excludes {dist} {version}: widen "
                    f"it in packages/{folder}/pyproject.toml and release {meta['name']} too"
                )
    return errors


def released_versions(dist: str, root: Path) -> list[Version]:
    """The versions of ``dist`` released before: its tags ``<dist>-vX.Y.Z`` in ``root``'s git
    repository, and the sections towncrier wrote into its CHANGELOG (``## <dist> X.Y.Z (date)``)."""
    found: set[Version] = set()
    tags = subprocess.run(
        ["git", "tag", "--list", f"{dist}-v*"], cwd=root, capture_output=True, text=True
    )
    for tag in tags.stdout.split() if tags.returncode == 0 else []:
        try:
            found.add(Version(tag.rsplit("-v", 1)[1]))
        except InvalidVersion:
            continue
    changelog = root / "packages" / folders_by_distribution()[dist] / "CHANGELOG.md"
    heading = re.compile(rf"^## {re.escape(dist)} (\S+) \(", re.MULTILINE)
    for match in heading.finditer(changelog.read_text() if changelog.is_file() else ""):
        try:
            found.add(Version(match.group(1)))
        except InvalidVersion:
            continue
    return sorted(found)


def first_release_fragments(package: Path) -> list[str]:
    """The news fragments of ``package`` that announce a first release."""
    return sorted(
        path.name
        for path in (package / "changes").glob("*.md")
        if path.read_text().lstrip().lower().startswith("first release")
    )


def release_label(
    dist: str, package: Path, root: Path, check: bool = True
) -> tuple[list[Version], str]:
    """The versions released before and the words that follow the version in the release's
    first line: ``(its first release: ...)`` only when nothing was released before.

    Raises:
        ReleaseError: with ``check``, when a news fragment announces a first release of a
            package released before.
    """
    before = released_versions(dist, root)
    announced = first_release_fragments(package)
    if check and before and announced:
        raise ReleaseError(
            f"only a package's first release is its first; {dist} was released before "
            f"({', '.join(map(str, before))}), and {', '.join(announced)} in "
            f"packages/{package.name}/changes/ announces a first release. Reword it to say what "
            "changed, or remove it."
        )
    if before:
        return before, f"(after {before[-1]})"
    return before, f"(its first release: nothing released before, no {dist}-v* tag)"


def bump(pyproject: Path, version: Version) -> None:
    """Write ``version`` into the single ``version = "..."`` line of ``pyproject``."""
    text = pyproject.read_text()
    if len(VERSION_LINE.findall(text)) != 1:
        raise ReleaseError(
            f'{pyproject} must hold exactly one line `version = "X.Y.Z"`; found '
            f"{len(VERSION_LINE.findall(text))}. Keep the version static, on one line."
        )
    pyproject.write_text(VERSION_LINE.sub(f'version = "{version}"', text))


def build_changelog(
    root: Path, folder: str, dist: str, version: Version, draft: bool, unreleased: Version
) -> str:
    """Build the package's news fragments into its CHANGELOG.md (only print them when ``draft``).

    ``unreleased`` is the version whose section was written by hand before any release
    (``## 0.1.0 (unreleased)``): it joins the new version's section.
    """
    package = root / "packages" / folder
    changelog = package / "CHANGELOG.md"
    fragments = list((package / "changes").glob("*.md"))
    if not fragments:
        raise ReleaseError(
            f"a release needs at least one news fragment in packages/{folder}/changes/; found "
            "none. Add one per change, e.g. changes/+my-change.added.md (types: added, "
            "changed, fixed, removed)."
        )
    command = [sys.executable, "-m", "towncrier", "build", "--config", str(root / "towncrier.toml")]
    command += ["--dir"]
    command += [str(package), "--name", dist, "--version", str(version)]
    result = _run([*command, "--draft" if draft else "--yes"], cwd=root)
    if draft:
        return result.stdout.split("\n\nLoading template", 1)[0].strip()
    # Notes written by hand for this version before fragments existed join its section.
    text = changelog.read_text()
    handwritten = HANDWRITTEN.format(version=unreleased)
    if handwritten in text:
        changelog.write_text(text.replace(handwritten, "### Details", 1))
    return changelog.read_text()


def _run(command: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(command, cwd=cwd, text=True, capture_output=True)
    if result.returncode != 0:
        raise ReleaseError(
            f"`{' '.join(command)}` failed (exit {result.returncode}):\n"
            f"{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
        )
    return result


def build(root: Path, folder: str, out: Path, siblings: Path) -> list[Path]:
    """Build the package (sdist and wheel) into ``out`` and its siblings' wheels into
    ``siblings``; return the package's files."""
    for name in local_closure(folder, folders_by_distribution().values()):
        dest, kind = (out, []) if name == folder else (siblings, ["--wheel"])
        command = ["uv", "build", "--quiet", "--package", distribution(name), *kind]
        _run([*command, "-o", str(dest)], cwd=root)
    files = sorted(out.glob(f"{distribution(folder).replace('-', '_')}-*"))
    kinds = {p.suffix for p in files}
    if kinds != {".whl", ".gz"}:
        raise ReleaseError(
            f"uv build must leave one sdist and one wheel of {distribution(folder)} in {out}; "
            f"found {[p.name for p in files]}. Empty the folder and build again."
        )
    return files


@contextmanager
def workspace_copy() -> Iterator[Path]:
    """A throwaway copy of the workspace's packages and root files, for a dry run."""
    with tempfile.TemporaryDirectory(prefix="accel-release-") as tmp:
        copy = Path(tmp) / "workspace"
        ignore = shutil.ignore_patterns("__pycache__", "*.egg-info", ".pytest_cache", "dist")
        shutil.copytree(ROOT / "packages", copy / "packages", ignore=ignore)
        for name in WORKSPACE_FILES:
            shutil.copy2(ROOT / name, copy / name)
        yield copy


def release(folder: str, wanted: str | None, dry_run: bool, tag: str | None, out: Path) -> None:
    """Run every step; raise ReleaseError at the first refusal."""
    dist = distribution(folder)
    current = current_version(ROOT / "packages" / folder / "pyproject.toml")
    if tag is not None:
        version = Version(tag.rsplit("-v", 1)[1])
        if version != current:
            raise ReleaseError(
                f"a release tag names the version of the package's pyproject.toml ({current}); "
                f"got {tag!r}. Tag {dist}-v{current}, or release {version} with "
                f"tools/release.py first."
            )
    else:
        assert wanted is not None
        version = next_version(current, wanted)
    errors = sibling_range_errors(dist, version, ROOT / "packages")
    if errors:
        raise ReleaseError(
            "every sibling must accept the new version through its declared range:\n- "
            + "\n- ".join(errors)
        )
    before, label = release_label(dist, ROOT / "packages" / folder, ROOT, check=tag is None)
    step(f"{dist} {current} -> {version} {label}" + (" (dry run, on a copy)" if dry_run else ""))
    with workspace_copy() if dry_run else _here() as root, tempfile.TemporaryDirectory() as tmp:
        if tag is None:
            bump(root / "packages" / folder / "pyproject.toml", version)
            if not dry_run:  # uv.lock records each workspace package's version
                _run(["uv", "lock", "--quiet"], cwd=root)
            step("changelog")
            unreleased = version if before else current
            print(build_changelog(root, folder, dist, version, dry_run, unreleased))
        step("build")
        files = build(root, folder, out, Path(tmp) / "siblings")
        if not all(f"-{version}" in p.name for p in files):
            raise ReleaseError(
                f"the built files must carry version {version}; got {[p.name for p in files]}. "
                f"Remove older files of {dist} from {out}."
            )
        print("\n".join(str(p) for p in files))
        step("twine check")
        print(_run([*TWINE, "check", "--strict", *map(str, files)], cwd=root).stdout.strip())
        step("install alone in a fresh environment and run its tests")
        wheels = wheels_in(Path(tmp) / "siblings") | wheels_in(out)
        start = time.perf_counter()
        ok, summary = check(
            folder,
            Job(sys.executable),
            wheels,
            workspace_constraints(),
            Path(tmp),
            progress=lambda line: print(f"   {line}", flush=True),
        )
        print(f"{'ok' if ok else 'FAIL'} {time.perf_counter() - start:.1f}s {summary}")
        if not ok:
            raise ReleaseError(f"{dist} {version} fails installed alone; fix it before releasing.")
    if tag is None and not dry_run:
        step("next")
        print(
            f"git commit -am 'Release {dist} {version}' && git tag {dist}-v{version} && "
            "git push --follow-tags   # the release workflow publishes the tag"
        )


@contextmanager
def _here() -> Iterator[Path]:
    yield ROOT


def step(what: str) -> None:
    print(f"\n== {what}", flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("package", nargs="?", help="Distribution or folder name.")
    parser.add_argument("version", nargs="?", help="X.Y.Z, or patch / minor / major.")
    parser.add_argument("--dry-run", action="store_true", help="Work on a copy; change nothing.")
    parser.add_argument("--tag", help="Check a release tag <package>-v<version> (CI).")
    parser.add_argument("--out", type=Path, help="Where the package's sdist and wheel go.")
    args = parser.parse_args(argv)
    if args.tag is not None:
        match = re.fullmatch(r"(.+)-v(\d+(?:\.\d+)*)", args.tag)
        if match is None or args.package or args.version:
            parser.error(
                f"--tag takes <distribution>-v<version> and no package or version; got "
                f"{args.tag!r}. Example: --tag accel-bigmodel-v0.2.0"
            )
        args.package = match.group(1)
    elif not (args.package and args.version):
        parser.error("give a package and a version (or --tag <package>-v<version>)")
    try:
        folder = resolve_package(args.package)
        with tempfile.TemporaryDirectory() as tmp:
            out = args.out or Path(tmp) / "dist"
            out.mkdir(parents=True, exist_ok=True)
            release(folder, args.version, args.dry_run, args.tag, out.resolve())
    except ReleaseError as err:
        print(f"release: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""tools/release.py refuses what would make a bad release, before it builds anything: unknown
packages, versions going backwards, siblings whose ranges exclude the new version, tags that
disagree with the pyproject. Each package has a changelog fed by fragments. The build, twine
check and fresh-environment tests run in the CI's release dry run (tools/test.sh)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
MARKER = "<!-- towncrier release notes start -->"


@pytest.fixture(scope="module")
def release() -> ModuleType:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return importlib.import_module("release")
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_packages_are_named_by_distribution_or_folder(release):
    assert release.resolve_package("accel-torch") == "accel"
    assert release.resolve_package("accel") == "accel"
    assert release.resolve_package("accel-data") == "accel-data"
    with pytest.raises(release.ReleaseError, match=r"got 'accel-date'.*accel-data"):
        release.resolve_package("accel-date")


def test_versions_move_forward_only(release):
    from packaging.version import Version

    current = Version("0.1.3")
    assert str(release.next_version(current, "patch")) == "0.1.4"
    assert str(release.next_version(current, "minor")) == "0.2.0"
    assert str(release.next_version(current, "major")) == "1.0.0"
    assert str(release.next_version(current, "0.1.3")) == "0.1.3"  # first release of it
    with pytest.raises(release.ReleaseError, match=r"current one \(0.1.3\); got 0.1.2.*0.1.4"):
        release.next_version(current, "0.1.2")
    with pytest.raises(release.ReleaseError, match=r"got 'soon'.*0.1.4"):
        release.next_version(current, "soon")


def test_sibling_ranges_must_accept_the_new_version(release, tmp_path):
    from packaging.version import Version

    packages = ROOT / "packages"
    assert release.sibling_range_errors("accel-state", Version("0.1.7"), packages) == []
    errors = release.sibling_range_errors("accel-state", Version("0.2.0"), packages)
    dependents = {
        p.parent.name
        for p in packages.glob("*/pyproject.toml")
        if any(
            r.startswith("accel-state")
            for r in tomllib.loads(p.read_text())["project"].get("dependencies", [])
        )
    }
    assert len(errors) == len(dependents) >= 6
    assert "accel-data requires 'accel-state>=0.1,<0.2', which excludes accel-state 0.2.0" in (
        "\n".join(errors)
    )
    assert all("widen it in packages/" in e for e in errors)
    # Nothing depends on the meta-package.
    assert release.sibling_range_errors("accel-torch", Version("7.0.0"), packages) == []


def test_bump_rewrites_the_one_version_line(release, tmp_path):
    from packaging.version import Version

    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[project]\nname = "x"\nversion = "0.1.0"\n\n[tool.x]\nversion = 3\n')
    release.bump(pyproject, Version("0.2.0"))
    assert tomllib.loads(pyproject.read_text())["project"]["version"] == "0.2.0"
    assert "version = 3" in pyproject.read_text()
    pyproject.write_text('[project]\nname = "x"\ndynamic = ["version"]\n')
    with pytest.raises(release.ReleaseError, match=r"exactly one line.*found 0"):
        release.bump(pyproject, Version("0.2.0"))


def test_command_line_refusals_name_the_rule(release, capsys):
    assert release.main(["--tag", "accel-collectives-v9.9.9"]) == 1
    err = capsys.readouterr().err
    assert "got 'accel-collectives-v9.9.9'" in err and "Tag accel-collectives-v0." in err
    assert release.main(["accel-state", "minor", "--dry-run"]) == 1
    err = capsys.readouterr().err
    assert "every sibling must accept the new version" in err and "accel-data requires" in err
    with pytest.raises(SystemExit):
        release.main(["--tag", "bigmodel-0.2"])
    assert "--tag takes <distribution>-v<version>" in capsys.readouterr().err


def test_each_package_has_a_changelog_fed_by_fragments(release):
    for pyproject in (ROOT / "packages").glob("*/pyproject.toml"):
        package = pyproject.parent
        changelog = (package / "CHANGELOG.md").read_text()
        assert MARKER in changelog.splitlines()[:3], package.name
        # The folder stays (.gitkeep) when a release has consumed every fragment.
        fragments = [p.name for p in (package / "changes").iterdir() if p.name != ".gitkeep"]
        kinds = {"added", "changed", "fixed", "removed"}
        assert all(name.split(".")[-2] in kinds for name in fragments), fragments


def _git(root: Path, *args: str) -> None:
    import subprocess

    subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args],
        cwd=root,
        check=True,
        capture_output=True,
    )


def test_a_first_release_is_one_only_when_nothing_was_released(release, tmp_path):
    from packaging.version import Version

    package = tmp_path / "packages" / "accel-collectives"
    (package / "changes").mkdir(parents=True)
    changelog = package / "CHANGELOG.md"
    changelog.write_text(f"# Changelog\n{MARKER}\n\n## 0.1.0 (unreleased)\n\n- First release.\n")
    (package / "changes" / "+first-release.added.md").write_text("First release: gathers.\n")
    (package / "changes" / "+pad.fixed.md").write_text("Padding keeps the dtype.\n")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "commit", "-q", "--allow-empty", "-m", "start")
    # Nothing released: no tag, and the CHANGELOG's only section was written by hand.
    assert release.released_versions("accel-collectives", tmp_path) == []
    assert release.release_label("accel-collectives", package, tmp_path) == (
        [],
        "(its first release: nothing released before, no accel-collectives-v* tag)",
    )
    assert release.first_release_fragments(package) == ["+first-release.added.md"]
    # A tag, or a section towncrier wrote, is a release.
    _git(tmp_path, "tag", "accel-collectives-v0.1.1")
    _git(tmp_path, "tag", "accel-data-v0.3.0")  # another package's tag does not count
    changelog.write_text(changelog.read_text() + "\n## accel-collectives 0.1.0 (2026-01-02)\n")
    found = release.released_versions("accel-collectives", tmp_path)
    assert found == [Version("0.1.0"), Version("0.1.1")]
    # Released before: a fragment that announces a first release is refused, naming it.
    with pytest.raises(release.ReleaseError, match=r"released before \(0.1.0, 0.1.1\).*\+first"):
        release.release_label("accel-collectives", package, tmp_path)
    (package / "changes" / "+first-release.added.md").unlink()
    assert release.release_label("accel-collectives", package, tmp_path)[1] == "(after 0.1.1)"

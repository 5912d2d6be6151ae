"""No page tells a reader to ``pip install accel``: that name on PyPI is an unrelated project
(the meta-package is ``accel-torch``; the packages are ``accel-<job>``)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WRONG = re.compile(r"pip install\s+[\"']?accel(?![\w.\[-])")


def _sources() -> list[Path]:
    pages = [*ROOT.glob("docs/**/*.md"), *ROOT.glob("README.md"), *ROOT.glob("*/README.md")]
    pages += [*ROOT.glob("packages/*/README.md"), *ROOT.glob("examples/**/README.md")]
    return [*pages, ROOT / "tools" / "mkdocs_hooks.py"]


def test_no_page_installs_the_unrelated_accel_project() -> None:
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in _sources()
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if WRONG.search(line)
    ]
    assert not found, (
        "the meta-package installs as `pip install accel-torch` (`accel` on PyPI is another "
        f"project); fix: {found}"
    )


def test_the_pattern_tells_the_names_apart() -> None:
    assert WRONG.search("pip install accel")
    assert WRONG.search("pip install 'accel'")
    assert not WRONG.search("pip install accel-torch")
    assert not WRONG.search('pip install "accel-torch[deepspeed]"')
    assert not WRONG.search("pip install accel-bigmodel")


def test_each_package_readme_says_how_to_install_before_it_is_published() -> None:
    # `pip install accel-bigmodel` fails until the packages are on PyPI: each README says so
    missing = [
        readme.relative_to(ROOT).as_posix()
        for readme in ROOT.glob("packages/*/README.md")
        if "Not published on PyPI yet" not in readme.read_text(encoding="utf-8")
        or "pip install --find-links dist" not in readme.read_text(encoding="utf-8")
    ]
    assert not missing, f"say how to install from a clone until the release: {missing}"

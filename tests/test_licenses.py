"""Every package ships the license it declares.

The packages declare ``license = "Apache-2.0"`` and ``license-files = ["LICENSE"]``; a wheel or
sdist holds only files of its own folder (a link out of it is refused by the build), so each
package folder keeps a copy of the root ``LICENSE``, and the copies must not drift.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import tomllib

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = sorted(p for p in (ROOT / "packages").iterdir() if (p / "pyproject.toml").is_file())


def test_the_root_license_is_the_apache_license_2_0() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.split()[:4] == ["Apache", "License", "Version", "2.0,"]
    assert "END OF TERMS AND CONDITIONS" in text
    assert "http://www.apache.org/licenses/LICENSE-2.0" in text


@pytest.mark.parametrize("folder", PACKAGES, ids=lambda p: p.name)
def test_each_package_declares_and_ships_the_license(folder: Path) -> None:
    project = tomllib.loads((folder / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project.get("license") == "Apache-2.0", (
        f"packages/{folder.name}/pyproject.toml declares license {project.get('license')!r}; "
        'every package is Apache-2.0: set license = "Apache-2.0".'
    )
    assert project.get("license-files") == ["LICENSE"], (
        f"packages/{folder.name}/pyproject.toml lists license-files "
        f'{project.get("license-files")!r}; set license-files = ["LICENSE"].'
    )
    copy = folder / "LICENSE"
    assert copy.is_file() and not copy.is_symlink(), (
        f"packages/{folder.name}/LICENSE must be a file (a link out of the package folder "
        "breaks its sdist); run: cp LICENSE packages/" + folder.name + "/LICENSE"
    )
    assert copy.read_bytes() == (ROOT / "LICENSE").read_bytes(), (
        f"packages/{folder.name}/LICENSE differs from the root LICENSE; run: "
        f"cp LICENSE packages/{folder.name}/LICENSE"
    )

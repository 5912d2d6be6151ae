"""Each re-exported name is declared once, and what is made from the tables is generated.

The modules at the reference's paths (``accel/state.py`` ...), the type stubs and the lazy loader
of the packages that stand alone are written by ``tools/gen_reexports.py``; its ``--check`` run
(``tests/test_architecture.py``) fails when one drifts. These tests pin the pieces.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def tool() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reexports", ROOT / "tools" / "gen_reexports.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_every_plain_module_at_a_reference_path_is_generated(tool: ModuleType) -> None:
    from accel._reexports._module_paths import PATHS

    shims = tool.shims()
    assert len(shims) >= 30
    hand_written = [
        path.relative_to(ROOT).as_posix()
        for path in shims
        if not path.read_text(encoding="utf-8").startswith(tool.SHIM_HEADER)
    ]
    assert not hand_written, hand_written
    # Only the packages (with submodules of their own) are left to write by hand.
    left = {
        p
        for p in PATHS
        if p.replace(".", "/") + ".py"
        not in {s.relative_to(ROOT / "packages/accel/src").as_posix() for s in shims}
    }
    assert left == {"accel.test_utils"}


def test_the_packages_that_stand_alone_share_the_lazy_loader(tool: ModuleType) -> None:
    source = tool.LAZY_SOURCE.read_text(encoding="utf-8")
    for copy in tool.LAZY_COPIES:
        assert copy.read_text(encoding="utf-8") == tool.LAZY_HEADER + source
    for package in ("accel_bigmodel", "accel_trackers"):
        module = importlib.import_module(package)
        assert module.__getattr__.__module__ == f"{package}._lazy"
        with pytest.raises(AttributeError, match="did you mean"):
            module.__getattr__(sorted(module._EXPORTS)[0] + "x")


def test_a_name_without_an_owner_is_refused() -> None:
    from accel._reexports._owners import Owned

    table = Owned("not_a_name_of_any_package")
    with pytest.raises(LookupError, match="'not_a_name_of_any_package' has no owner"):
        table["not_a_name_of_any_package"]
    with pytest.raises(KeyError):
        table["absent"]


def test_each_name_has_one_owner(tool: ModuleType) -> None:
    tool.check_owners()  # SystemExit names a name declared by two owners
    from accel._reexports._owners import FACADE_OWNED, PACKAGES

    for package in PACKAGES:
        exports = importlib.import_module(package)._EXPORTS
        assert not set(exports) & set(FACADE_OWNED), package

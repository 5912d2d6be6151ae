"""Every exception a user catches is public: at its package's top level, at ``accel`` and at
``accel.utils``, and on the API reference page of the docs site.

The list is complete: an exception class defined in any package's sources (a top-level class
whose name ends in ``Error`` or ``Exception``) must be in it.
"""

from __future__ import annotations

import ast
import importlib
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "docs"))
from docs_test_helpers import load_module  # noqa: E402

# Exception -> the package whose top level exports it.
PUBLIC_EXCEPTIONS = {
    "CheckpointKeysError": "accel_bigmodel",
    "CorruptSafetensorsError": "accel_bigmodel",
    "DeviceMapError": "accel_bigmodel",
    "OffloadedFileChangedError": "accel_bigmodel",
    "PathOutsideCheckpointError": "accel_bigmodel",
    "UntrustedPickleError": "accel_bigmodel",
    "DistributedOperationException": "accel_collectives",
    "ConfigError": "accel_launch",
    "PipelineTraceError": "accel_pipeline",
    "QuantStateMismatchError": "accel_precision",
    "AccelerateAlreadyImportedError": "accel",
    "AsyncSaveError": "accel",
    "CheckpointIntegrityError": "accel",
    "CheckpointLockedError": "accel",
    "CheckpointSyncError": "accel",
    "CheckpointWriteError": "accel",
    "StateRefusedError": "accel",
    "UnsafeCheckpointError": "accel",
}

# Exceptions of the test helpers -> the module where test suites import them (the reference's
# ``accelerate.test_utils.testing`` path): raised by a test helper, caught by a test, not by
# training code, so they are not at ``accel`` or ``accel.utils``.
TEST_HELPER_EXCEPTIONS = {
    "SubprocessCallException": "accel.test_utils.testing",
}


def _defined_exception_names() -> set[str]:
    """Names of the public exception classes defined anywhere in the packages' sources."""
    found = set()
    for path in ROOT.glob("packages/*/src/*/**/*.py"):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if (
                isinstance(node, ast.ClassDef)
                and not node.name.startswith("_")
                and node.name.endswith(("Error", "Exception"))
            ):
                found.add(node.name)
    return found


def test_the_list_holds_every_exception_the_packages_define() -> None:
    missing = sorted(
        _defined_exception_names() - set(PUBLIC_EXCEPTIONS) - set(TEST_HELPER_EXCEPTIONS)
    )
    assert not missing, (
        f"Every exception a package defines is public and listed here; {missing} are not. Export "
        "each from its package's __init__ and from accel's ERRORS map (accel/_reexports/_public_names.py), "
        "then add it to PUBLIC_EXCEPTIONS."
    )


@pytest.mark.parametrize("name", sorted(TEST_HELPER_EXCEPTIONS))
def test_a_test_helper_exception_is_public_where_test_suites_import_it(name: str) -> None:
    module = importlib.import_module(TEST_HELPER_EXCEPTIONS[name])
    error = getattr(module, name)
    assert isinstance(error, type) and issubclass(error, Exception), error
    assert name in module.__all__, f"{name} is missing from {module.__name__}.__all__"


@pytest.mark.parametrize("name", sorted(PUBLIC_EXCEPTIONS))
def test_exception_is_public_at_every_path(name: str) -> None:
    package = importlib.import_module(PUBLIC_EXCEPTIONS[name])
    accel = importlib.import_module("accel")
    utils = importlib.import_module("accel.utils")
    error = getattr(package, name)
    assert isinstance(error, type) and issubclass(error, Exception), error
    assert name in package.__all__, f"{name} is missing from {package.__name__}.__all__"
    assert name in accel.__all__ and getattr(accel, name) is error
    assert name in utils.__all__ and getattr(utils, name) is error


def test_every_exception_is_on_its_api_reference_page() -> None:
    hooks = load_module("tools/mkdocs_hooks.py")
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    pages = {package: (page, title, summary) for page, package, title, summary in hooks.API_PAGES}
    by_package: dict[str, list[str]] = {}
    for name, package in PUBLIC_EXCEPTIONS.items():
        by_package.setdefault(package, []).append(name)
    for package, names in by_package.items():
        if package == "accel":
            # The facade's page documents the names accel defines with its own entries.
            text = "\n".join(hooks._entries("accel", names))
            assert "api/accel.md" in nav
        else:
            page, title, summary = pages[package]
            text = hooks.api_page(package, title, summary)
            assert f"api/{page}.md" in nav, f"api/{page}.md is not in the mkdocs.yml nav"
        for name in names:
            assert f"::: {package}.{name}" in text, f"{package}.{name} is not on its API page"

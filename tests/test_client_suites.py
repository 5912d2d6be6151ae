"""tools/client_suites.py: the clients' suites run on both sides, and the comparison fails on an
unlisted test that passes only on the reference (the suites themselves run in CI's
``client_suites`` step)."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def suites() -> ModuleType:
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        return importlib.import_module("client_suites")
    finally:
        sys.path.remove(str(ROOT / "tools"))


def test_each_side_runs_on_its_own_library_and_differences_are_counted_per_file(
    suites: ModuleType, tmp_path: Path
) -> None:
    """A tiny suite run for real on both sides: the switch decides which library answers
    ``import accelerate``, and the counts say which tests passed where."""
    pytest.importorskip("accelerate", reason="the reference: uv sync --group bench")
    root = tmp_path / "client"
    (root / "tests").mkdir(parents=True)
    (root / "tests" / "test_probe.py").write_text(
        "import accelerate\n"
        "import pytest\n\n"
        "def test_anywhere():\n    assert accelerate.__version__\n\n"
        "def test_reference_only():\n    assert 'site-packages' in accelerate.__file__\n\n"
        "def test_accel_only():\n    assert 'site-packages' not in accelerate.__file__\n\n"
        "class TestGroup:\n    def test_fails(self):\n        assert False\n\n"
        "    @pytest.mark.skip(reason='never')\n    def test_skipped(self):\n        pass\n"
    )
    suite = suites.Suite("probe", root, ("tests/test_probe.py",))
    counts, walls = suites.run_suite(suite, tmp_path)
    row = counts["tests/test_probe.py"]
    assert (row.reference, row.accel, row.both) == (2, 2, 1)
    assert row.only_reference == ["tests/test_probe.py::test_reference_only"]
    assert row.only_accel == ["tests/test_probe.py::test_accel_only"]
    assert set(walls) == {"reference", "accel"}

    unexpected, fixed = suites.verdict("probe", counts, {})
    assert unexpected == ["probe tests/test_probe.py::test_reference_only"]
    listed = {"probe tests/test_probe.py::test_reference_only": "why", "peft tests/x.py::t": "y"}
    assert suites.verdict("probe", counts, listed) == ([], [])
    gone = {"probe tests/test_probe.py::test_gone": "fixed since"}
    assert suites.verdict("probe", counts, gone)[1] == ["probe tests/test_probe.py::test_gone"]


def test_junit_names_become_file_class_test_ids(suites: ModuleType) -> None:
    assert (
        suites.test_id("tests.trainer.test_trainer_data.TrainerDataTest", "test_x")
        == "tests/trainer/test_trainer_data.py::TrainerDataTest::test_x"
    )
    assert suites.test_id("tests.test_other", "test_y") == "tests/test_other.py::test_y"
    assert suites.test_id("", "tests.test_broken") == "tests/test_broken.py"


def test_a_listed_difference_without_its_reason_is_refused(
    suites: ModuleType, tmp_path: Path
) -> None:
    listing = tmp_path / "expected.txt"
    listing.write_text("# comment\npeft tests/test_a.py::test_b  # item 6: the loss\n")
    assert suites.read_expected(listing) == {"peft tests/test_a.py::test_b": "item 6: the loss"}
    listing.write_text("peft tests/test_a.py::test_b\n")
    with pytest.raises(SystemExit, match="SUITE TEST-ID  # reason"):
        suites.read_expected(listing)


def test_the_committed_list_parses_and_names_known_suites(suites: ModuleType) -> None:
    for entry, reason in suites.read_expected().items():
        assert entry.split()[0] in {"peft", "transformers"}, entry
        assert reason


def test_the_page_keeps_the_sections_of_suites_not_run(suites: ModuleType, tmp_path: Path) -> None:
    page = tmp_path / "client-suites.md"
    suites.write_page(page, {"transformers": "### transformers\n\nold\n"})
    suites.write_page(page, {"peft": "### peft\n\nnew\n"})
    text = page.read_text()
    assert "### peft\n\nnew" in text
    assert "### transformers\n\nold" in text
    assert suites.PEFT_SHA256 in text


def test_the_hub_endpoint_of_the_runs_refuses_at_once(suites: ModuleType) -> None:
    """Both sides get a local endpoint whose 404 is final, so a test that downloads a model
    fails at once on both sides instead of retrying against an unreachable Hub."""
    import urllib.error
    import urllib.request

    endpoint = suites.environment("accel")["HF_ENDPOINT"]
    assert endpoint == suites.environment("reference")["HF_ENDPOINT"]
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(f"{endpoint}/api/models/some/model", timeout=10)

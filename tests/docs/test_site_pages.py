"""The site's navigation and its generated pages: benchmarks summarised on one page, pages for
contributors last, every example path linked, every package's changelog on the site."""

from __future__ import annotations

import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import ROOT, load_module

pages = load_module("tools/docs_pages.py")


def _nav() -> list[dict[str, object]]:
    from mkdocs.config import load_config

    return load_config(str(ROOT / "mkdocs.yml")).nav


def _files(entry: object) -> list[str]:
    if isinstance(entry, str):
        return [entry]
    if isinstance(entry, dict):
        return [f for value in entry.values() for f in _files(value)]
    if isinstance(entry, list):
        return [f for value in entry for f in _files(value)]
    return []


def test_the_benchmark_summary_links_every_result_page() -> None:
    summary = (ROOT / "docs" / "comparison.md").read_text(encoding="utf-8")
    linked = set(re.findall(r"\]\(benchmarks/([\w-]+\.md)\)", summary))
    results = {path.name for path in (ROOT / "benchmarks" / "results").glob("*.md")}
    assert results - linked == set(), "docs/comparison.md lists every benchmark page"


def test_guides_come_first_and_pages_for_contributors_last() -> None:
    nav = _nav()
    titles = [next(iter(entry)) for entry in nav if isinstance(entry, dict)]
    assert titles[-2:] == ["Benchmarks", "Contributing"]
    assert titles.index("Reference") < titles.index("Benchmarks")
    contributing = _files(nav[-1])
    assert contributing == ["repository.md", "benchmarks/ci.md", "gpu-check.md"]
    benchmarks = nav[-2]["Benchmarks"]
    assert isinstance(benchmarks, list) and benchmarks[0] == {"Summary": "comparison.md"}
    assert len(benchmarks) <= 8  # a summary and a few folded groups, not one entry per page


def test_example_paths_link_to_the_examples_page_or_the_repository() -> None:
    text = (
        "Run `examples/quicktour.py`, see `examples/by_feature/` and `examples/missing.py`.\n"
        "```bash\npython `examples/quicktour.py`\n```\n"
        "[`examples/cv_example.py`](somewhere)\n"
    )
    out = pages.link_example_paths(text, None, "concepts/page.md")
    assert "[`examples/quicktour.py`](../examples.md#quicktour-py)" in out
    assert "[`examples/by_feature/`](../examples.md#by_feature)" in out
    assert "`examples/missing.py`." in out  # no such file: left as code
    assert "python `examples/quicktour.py`\n" in out  # code blocks are untouched
    assert "[`examples/cv_example.py`](somewhere)" in out
    assert (
        pages.link_example_paths("see `ARCHITECTURE.md`", None, "x.md") == "see `ARCHITECTURE.md`"
    )
    url = pages.link_example_paths(
        text + "`ARCHITECTURE.md`", "https://example.org/team/accel", "x.md"
    )
    assert "(https://example.org/team/accel/blob/main/ARCHITECTURE.md)" in url
    assert "(https://example.org/team/accel/blob/main/examples/quicktour.py)" in url
    assert "(https://example.org/team/accel/tree/main/examples/by_feature)" in url


def test_the_examples_page_has_an_anchor_and_the_source_of_every_script() -> None:
    page = pages.examples_page(None)
    for path in sorted((ROOT / "examples").rglob("*.py")):
        name = path.relative_to(ROOT).as_posix()
        assert f"### `{name}` {{#{pages.example_anchor(name)}}}" in page
        assert f'??? example "The source of `{path.name}`"' in page
    assert "](training.md)" in page  # the README's links into docs/ stay site links


def test_the_changelog_page_holds_every_package_and_its_pending_changes() -> None:
    page = pages.changelog_page()
    for changelog in (ROOT / "packages").glob("*/CHANGELOG.md"):
        name = changelog.parent.name
        assert f"\n## {'accel-torch' if name == 'accel' else name}\n" in page
    fragment = next((ROOT / "packages" / "accel-state" / "changes").glob("*.md"))
    first_words = " ".join(fragment.read_text(encoding="utf-8").split()[:6])
    assert first_words in page

"""The built site as a reader sees it: no Sphinx role printed literally, no private sentinel in a
signature, ``--help`` texts that wrap instead of scrolling sideways.

The pages are read from ``build/site`` when it is newer than every file the build reads (the
docs step of ``tools/test.sh`` builds it just before the tests); otherwise the site is built
here, into a temporary folder.
"""

from __future__ import annotations

import html
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import ROOT, load_module

links = load_module("tools/roles_to_links.py")

SOURCES = ("mkdocs.yml", "docs", "tools", "packages", "benchmarks/results")


def _newest_source() -> float:
    newest = 0.0
    for name in SOURCES:
        path = ROOT / name
        files = [path] if path.is_file() else path.rglob("*")
        for file in files:
            if file.suffix in (".py", ".md", ".yml", ".css", ".png", ".toml") and file.is_file():
                newest = max(newest, file.stat().st_mtime)
    return newest


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    built = ROOT / "build" / "site"
    index = built / "index.html"
    if index.exists() and index.stat().st_mtime >= _newest_source():
        return built
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    # without --quiet: mkdocs counts the warnings it logs, and --quiet hides them from --strict
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)]
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert "WARNING" not in result.stderr, result.stderr[-3000:]
    return out


def _pages(site: Path) -> dict[str, str]:
    return {
        path.relative_to(site).as_posix(): path.read_text(encoding="utf-8")
        for path in sorted(site.rglob("*.html"))
    }


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_no_page_prints_a_sphinx_role(site: Path) -> None:
    left = {
        name: [" ".join(found.split()) for found in links.left_in(page)]
        for name, page in _pages(site).items()
    }
    left = {name: found for name, found in left.items() if found}
    assert not left, f"raw roles in the built pages (tools/roles_to_links.py converts them): {left}"


def test_roles_of_the_api_pages_link_to_their_targets(site: Path) -> None:
    page = (site / "api" / "bigmodel" / "index.html").read_text(encoding="utf-8")
    # AlignDevicesHook.init_hook's docstring links load_checkpoint_in_model
    assert re.search(
        r'<a class="autorefs autorefs-internal"[^>]*href="#accel_bigmodel.load_checkpoint_in_model"',
        page,
    )


def test_signatures_show_no_private_sentinel(site: Path) -> None:
    private = re.compile(r"(\w+)(?:\s*:\s*[^=\n]{1,80}?)?\s=\s(_[A-Za-z]\w*)")
    found = []
    for name, page in _pages(site).items():
        if not name.startswith("api/"):
            continue
        for signature in re.findall(
            r'<div class="doc-signature[^"]*"[^>]*>(.*?)</div>', page, re.S
        ):
            found += [f"{name}: {m.group(0)}" for m in private.finditer(_text(signature))]
        found += [f"{name}: {m.group(0)}" for m in private.finditer(_text(page))]
    assert not found, "tools/griffe_defaults.py shows the effective default; add the sentinel there"
    accel_page = _text((site / "api" / "accel" / "index.html").read_text(encoding="utf-8"))
    assert "split_batches: bool = False" in accel_page


def test_the_command_line_page_wraps_its_help_texts(site: Path) -> None:
    page = (site / "cli" / "index.html").read_text(encoding="utf-8")
    assert page.count('<div class="cli-help highlight">') >= 7  # accel and each subcommand
    assert "``" not in _text(page)
    css = (site / "stylesheets" / "extra.css").read_text(encoding="utf-8")
    rule = css.split(".md-typeset .cli-help pre > code", 1)[1].split("}", 1)[0]
    assert "white-space: pre-wrap" in rule
    assert 'href="../stylesheets/extra.css"' in page


def test_every_chart_opens_full_size(site: Path) -> None:
    charts = 0
    for name, page in _pages(site).items():
        for image in re.finditer(r'<img alt="[^"]*" src="([^"]+\.png)"\s*/?>', page):
            charts += 1
            before = page[: image.start()]
            link = re.search(r'<a class="chart-full-size" href="([^"]+)"[^>]*>$', before)
            assert link is not None and link.group(1) == image.group(1), f"{name}: {image.group(0)}"
    assert charts >= 49


hooks = load_module("tools/mkdocs_hooks.py")


def test_the_site_shows_the_version_and_the_repository(site: Path) -> None:
    import importlib.metadata

    version = importlib.metadata.version("accel-torch")
    home = (site / "index.html").read_text(encoding="utf-8")
    assert f"<title>accel {version}</title>" in home
    assert f"accel {version} · Apache License 2.0" in home
    assert 'href="repository/"' in home  # in the navigation
    readme = _text((site / "repository" / "index.html").read_text(encoding="utf-8"))
    if 'class="md-source"' in home:  # built with ACCEL_REPO_URL
        assert "no public address" not in readme
    else:
        assert "The repository has no public address yet" in readme
        assert "`packages/accel`" not in readme and "(packages/accel)" in readme


def test_a_repository_address_links_the_header_and_each_guide(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from mkdocs.config import load_config

    monkeypatch.setenv("ACCEL_REPO_URL", "https://example.org/team/accel")
    config = load_config(str(ROOT / "mkdocs.yml"))
    assert config.repo_url == "https://example.org/team/accel"
    assert config.edit_uri == "edit/main/docs/"
    assert "content.action.edit" in config.theme["features"]
    page = hooks.readme_page("https://example.org/team/accel")
    assert "](https://example.org/team/accel/blob/main/ARCHITECTURE.md)" in page
    assert "](migration.md)" in page  # a guide stays a link of the site
    assert "no public address" not in page
    monkeypatch.delenv("ACCEL_REPO_URL")
    assert load_config(str(ROOT / "mkdocs.yml")).repo_url is None
    assert "`ARCHITECTURE.md`" in hooks.readme_page(None)


@pytest.mark.parametrize(
    ("repo_url", "edit_uri", "expected"),
    [
        (None, None, None),  # mkdocs.yml's default, edit/main/docs/, has nothing to join
        ("https://example.org/team/accel", None, "edit/main/docs/"),
        (None, "https://example.org/team/accel/edit/main/docs/", "same"),
        (None, "edit/dev/docs/", None),
    ],
)
def test_a_build_without_an_address_has_no_relative_edit_link(
    monkeypatch: pytest.MonkeyPatch, repo_url: str | None, edit_uri: str | None, expected: str
) -> None:
    # mkdocs warns once per page for a relative edit link with no repo_url: --strict aborts
    from mkdocs.config import load_config

    for name, value in (("ACCEL_REPO_URL", repo_url), ("ACCEL_EDIT_URI", edit_uri)):
        if value is None:
            monkeypatch.delenv(name, raising=False)
        else:
            monkeypatch.setenv(name, value)
    config = hooks.on_config(load_config(str(ROOT / "mkdocs.yml")))
    assert config.edit_uri == (edit_uri if expected == "same" else expected)


HTML_TAGS = frozenset(
    """a abbr article aside autoref b blockquote body br button circle code col colgroup dd del
    details div dl dt em footer form g h1 h2 h3 h4 h5 h6 head header hr html i img input kbd label
    li link main meta nav noscript ol option p path pre rect script section select small source
    span strong style sub summary sup svg table tbody td textarea tfoot th thead title tr u ul
    var""".split()
)
"""Every tag the site's pages use; anything else is text a browser swallows."""


def unknown_tags(page: str) -> set[str]:
    """Names of ``<name>`` tags in ``page`` that HTML does not know: a placeholder such as
    ``<what>`` written in a docstring or a guide outside code, which the browser hides."""
    return {tag.lower() for tag in re.findall(r"<([A-Za-z][\w-]*)[\s>/]", page)} - HTML_TAGS


def test_the_placeholder_check_sees_a_swallowed_placeholder() -> None:
    assert unknown_tags("<p><what> is not supported; got <got>.</p>") == {"what", "got"}
    assert unknown_tags("<p><code>&lt;what&gt;</code> <span>x</span></p>") == set()


def test_no_page_swallows_a_placeholder_as_an_html_tag(site: Path) -> None:
    found = {name: tags for name, page in _pages(site).items() if (tags := unknown_tags(page))}
    assert not found, (
        "placeholders read as HTML tags (the browser hides them): write `{name}` or NAME, or "
        f"put them in code: {found}"
    )

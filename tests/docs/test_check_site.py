"""tools/check_site.py sees what a reader's browser console would show: a page that logs an
error, throws, or loads a missing file fails the check; a clean page passes, with a screenshot."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docs_test_helpers import load_module

check_site = load_module("tools/check_site.py")

if check_site.find_browser() is None:
    pytest.skip("no Chromium on PATH (tools/test.sh installs Debian's)", allow_module_level=True)

BROKEN = """<!doctype html><html><body><h1>Broken</h1>
<script>console.error("boom from the console"); missingFunction();</script>
<img src="missing.png"></body></html>"""
CLEAN = "<!doctype html><html><body><h1>Clean</h1><p>fine</p></body></html>"


def test_errors_fail_the_page_and_a_clean_page_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    site = tmp_path / "site"
    (site / "clean").mkdir(parents=True)
    (site / "index.html").write_text(BROKEN, encoding="utf-8")
    (site / "clean" / "index.html").write_text(CLEAN, encoding="utf-8")
    shots = tmp_path / "shots"
    code = check_site.main([str(site), "--pages", "/", "clean/", "--screenshots", str(shots)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "console.error: boom from the console" in out
    assert "missingFunction is not defined" in out
    assert "missing.png" in out
    assert "check_site: clean/: ok" in out
    for name in ("site_home.png", "site_clean.png"):
        assert (shots / name).read_bytes()[:4] == b"\x89PNG"

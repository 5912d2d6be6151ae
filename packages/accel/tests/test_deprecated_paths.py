"""Module paths of the reference that act on import: ``accel.memory_utils`` (deprecated: it
warns) and ``accel.utils.rich`` (installs rich's traceback handler). Each runs in a fresh
interpreter, since the effect happens once per process."""

from __future__ import annotations

import subprocess
import sys

import pytest


def _run(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False
    )


def test_memory_utils_warns_where_the_finder_moved():
    out = _run(
        "import warnings\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import accel.memory_utils\n"
        "print([(w.category.__name__, str(w.message)) for w in caught])"
    )
    assert out.returncode == 0, out.stderr
    assert "FutureWarning" in out.stdout
    assert "find_executable_batch_size" in out.stdout


def test_utils_rich_installs_the_rich_traceback_handler():
    pytest.importorskip("rich", reason="rich is not installed: pip install rich")
    out = _run("import sys\nimport accel.utils.rich\nprint(sys.excepthook.__module__)")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "rich.traceback"


def test_utils_rich_without_rich_names_the_install_command():
    out = _run(
        "import sys\n"
        "sys.modules['rich'] = None  # an import of rich fails as if it were absent\n"
        "import accel.utils.rich"
    )
    assert out.returncode != 0
    assert "pip install rich" in out.stderr, out.stderr

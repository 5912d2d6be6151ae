"""Run the single-process examples of the given pages, each page in a fresh folder and namespace.

Usage: python run_pages.py RESULTS.json PAGE.md [PAGE.md ...]

Writes ``{page: {"ran": n, "error": traceback or null, "seconds": s}}``; a page stops at its first failing
block. Line numbers in tracebacks are the page's own.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import time
import traceback
from pathlib import Path

from markdown_blocks import ROOT, blocks


def run_page(path: Path) -> dict[str, object]:
    """Execute the page's run and setup blocks in order, in one namespace."""
    import torch
    from accel_state.testing import reset_state

    reset_state()
    torch.manual_seed(0)
    namespace: dict[str, object] = {"__name__": "__main__"}
    ran = 0
    start = time.perf_counter()
    cwd = os.getcwd()
    with tempfile.TemporaryDirectory(prefix="docs-page-") as folder:
        os.chdir(folder)
        try:
            for block in blocks(path):
                if block.kind not in ("run", "setup"):
                    continue
                source = "\n" * (block.line - 1) + block.code  # tracebacks show page lines
                exec(compile(source, block.page, "exec"), namespace)
                ran += 1
        except BaseException:  # a SystemExit of an example is a failure too
            return {"ran": ran, "error": traceback.format_exc(), "seconds": _since(start)}
        finally:
            os.chdir(cwd)
            reset_state()
    return {"ran": ran, "error": None, "seconds": _since(start)}


def _since(start: float) -> float:
    return round(time.perf_counter() - start, 2)


def main() -> int:
    out, *names = sys.argv[1:]
    results = {name: run_page(ROOT / name) for name in names}
    Path(out).write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

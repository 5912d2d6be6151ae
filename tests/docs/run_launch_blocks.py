"""Run the multi-process examples of the docs, one after the other, in the processes of one launch.

Usage: accel launch --num_processes N run_launch_blocks.py BLOCKS.json WORKDIR

Each block runs as its own script (a fresh namespace named ``__main__``) in its own subfolder
of WORKDIR, shared by the processes. A failing block prints ``DOCS BLOCK FAILED <page:line>``
with the traceback and ends the process with code 1, which ends the launch.
"""

from __future__ import annotations

import json
import os
import sys
import traceback
from pathlib import Path


def main() -> int:
    blocks_file, workdir = sys.argv[1:3]
    from accel_state import PartialState
    from accel_state.testing import reset_state

    for index, block in enumerate(json.loads(Path(blocks_file).read_text(encoding="utf-8"))):
        folder = Path(workdir) / f"block_{index}"
        folder.mkdir(parents=True, exist_ok=True)
        os.chdir(folder)
        source = "\n" * (block["line"] - 1) + block["code"]
        try:
            exec(compile(source, block["page"], "exec"), {"__name__": "__main__"})
        except BaseException:
            print(f"DOCS BLOCK FAILED {block['page']}:{block['line']}", flush=True)
            traceback.print_exc()
            sys.stdout.flush()
            os._exit(1)
        print(f"DOCS BLOCK PASSED {block['page']}:{block['line']}", flush=True)
        reset_state()
        PartialState().wait_for_everyone()
    return 0


if __name__ == "__main__":
    sys.exit(main())

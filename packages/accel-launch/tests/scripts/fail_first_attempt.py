"""Rank 1 fails on the first attempt only; after the restart every rank reports."""

import os
import runpy
import sys
from pathlib import Path

if os.environ["TORCHELASTIC_RESTART_COUNT"] == "0" and os.environ["RANK"] == "1":
    print("rank 1 fails on attempt 0", file=sys.stderr)
    sys.exit(3)
runpy.run_path(str(Path(__file__).with_name("report_env.py")), run_name="__main__")

"""Started by every Python process of a reference-suite run (the folder is on PYTHONPATH).

Installs the finder that serves ``accelerate.*`` from accel, so the suite's launched
scripts and subprocesses run on accel too.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import _hook

sys.path.pop(0)
_hook.install()

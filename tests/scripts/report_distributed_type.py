"""Launched by tests/test_launch_distributed_type.py: reports the distributed type this process
uses once an Accelerator exists (no plugin, no argument: the launcher decides)."""

import os

from accel import Accelerator
from accel_state import AcceleratorState

accelerator = Accelerator()
state = AcceleratorState()
line = (
    f"CHILD rank={accelerator.process_index} of={accelerator.num_processes} "
    f"type={state.distributed_type.value}\n"
)
os.write(1, line.encode())  # one write: the lines of two processes never interleave
accelerator.wait_for_everyone()

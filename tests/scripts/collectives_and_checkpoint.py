"""A short 2-process job that uses collectives and checkpoints, then exits without teardown.

Argument: a project folder. Prints ``done <rank>`` at the end.
"""

import sys

import torch
from accel import Accelerator
from accel.utils import ProjectConfiguration, gather, reduce

config = ProjectConfiguration(project_dir=sys.argv[1], automatic_checkpoint_naming=True)
accelerator = Accelerator(cpu=True, project_config=config)
model = accelerator.prepare(torch.nn.Linear(4, 4))
accelerator.load_state("latest")
for _ in range(5):
    value = torch.full((2,), float(accelerator.process_index))
    assert gather(value).tolist() == [0.0, 0.0, 1.0, 1.0]
    reduce(value)
accelerator.save_state()
accelerator.wait_for_everyone()
# One write of one line: both processes share the launcher's stdout, and print() with several
# arguments writes them one by one, so two processes' words could interleave ("donedone 0 1").
sys.stdout.write(f"done {accelerator.process_index}\n")
sys.stdout.flush()

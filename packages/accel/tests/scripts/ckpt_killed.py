"""Save a checkpoint, then get killed (SIGKILL) in the middle of saving the next one."""

import os
import signal
import sys

import torch

from accel import Accelerator
from accel.utils import ProjectConfiguration


class DiesOnSecondSave:
    def __init__(self):
        self.calls = 0

    def state_dict(self):
        self.calls += 1
        if self.calls == 2:
            os.kill(os.getpid(), signal.SIGKILL)
        return {"value": 10}

    def load_state_dict(self, state):
        pass


config = ProjectConfiguration(project_dir=sys.argv[1], automatic_checkpoint_naming=True)
accelerator = Accelerator(project_config=config)
torch.manual_seed(0)
model = accelerator.prepare(torch.nn.Linear(8, 8))
accelerator.register_for_checkpointing(DiesOnSecondSave())
accelerator.save_state()
with torch.no_grad():
    model.weight.add_(1.0)
accelerator.save_state()  # killed after the weights of this one are written

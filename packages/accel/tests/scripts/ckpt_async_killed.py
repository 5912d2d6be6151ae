"""Save a checkpoint, then die (``os._exit(3)``) on the background writer thread of the next,
asynchronous one, after its weights are written and while training goes on."""

import os
import sys
import threading

import torch

from accel import Accelerator
from accel.utils import ProjectConfiguration


class DiesWhenWritten:
    """Copied at the call; writing it (pickling, on the writer thread) ends the process."""

    def __deepcopy__(self, memo):
        return DiesWhenWritten()

    def __reduce_ex__(self, protocol):
        assert threading.current_thread() is not threading.main_thread()
        os._exit(3)


class Holder:
    def __init__(self):
        self.saves = 0

    def state_dict(self):
        self.saves += 1
        return {"value": 10} if self.saves == 1 else {"value": DiesWhenWritten()}

    def load_state_dict(self, state):
        pass


config = ProjectConfiguration(project_dir=sys.argv[1], automatic_checkpoint_naming=True)
accelerator = Accelerator(cpu=True, project_config=config)
torch.manual_seed(0)
model = accelerator.prepare(torch.nn.Linear(8, 8))
accelerator.register_for_checkpointing(Holder())
accelerator.save_state()
with torch.no_grad():
    model.weight.add_(1.0)
handle = accelerator.save_state(async_save=True)
for _ in range(100):  # training continues on the main thread until the writer kills the process
    with torch.no_grad():
        model.weight.add_(1.0)
handle.wait()
sys.exit(0)  # not reached

"""Run on 2 processes: ``OUT``. Each process passes its own folder to save_state: both refuse
with the same ValueError naming both folders, nothing is written in either, and a save to one
shared folder then works."""

import os
import sys

import torch

from accel import Accelerator

OUT = sys.argv[1]

accelerator = Accelerator(cpu=True)
model, optimizer = accelerator.prepare(
    torch.nn.Linear(4, 2), torch.optim.SGD(torch.nn.Linear(4, 2).parameters(), lr=0.1)
)
rank = accelerator.process_index


def refusal(folder: str) -> str:
    """The message of save_state's refusal of ``folder``."""
    try:
        accelerator.save_state(folder)
    except ValueError as exc:
        return str(exc)
    raise AssertionError("save_state accepted a different folder on each process")


message = refusal(os.path.join(OUT, f"only-rank-{rank}"))
assert "every process must pass the same output_dir" in message, message
assert "only-rank-0" in message and "only-rank-1" in message, message
accelerator.wait_for_everyone()  # the writer has removed its staging folder by now
assert os.listdir(OUT) == [], os.listdir(OUT)
print(f"PASSED check_refused rank={rank}", flush=True)
accelerator.wait_for_everyone()
shared = os.path.join(OUT, "shared")
accelerator.save_state(shared)
assert os.path.isdir(shared)
print(f"PASSED check_shared rank={rank}", flush=True)

"""Run by accel.test_utils.get_launch_command on 2 processes: each adds its rank + 1 over gloo
and prints one line with what it saw."""

import json

import torch
import torch.distributed as dist

from accel import Accelerator

accelerator = Accelerator(cpu=True)
value = torch.tensor([float(accelerator.process_index + 1)])
dist.all_reduce(value)
line = {
    "rank": accelerator.process_index,
    "world": accelerator.num_processes,
    "sum": value.item(),
}
print("ROW " + json.dumps(line), flush=True)
accelerator.wait_for_everyone()
dist.destroy_process_group()

"""Print the ParallelismConfig the Accelerator of this process received, one JSON line."""

import json
import os

from accel import Accelerator

accelerator = Accelerator()
layout = accelerator.parallelism_config
report = {
    "rank": accelerator.process_index,
    "distributed_type": str(accelerator.distributed_type.value),
    "sizes": None if layout is None else layout.sizes,
    "cp_comm_strategy": None if layout is None else layout.cp_handler.cp_comm_strategy,
}
os.write(1, ("REPORT " + json.dumps(report) + "\n").encode())  # one write: no interleaving
accelerator.wait_for_everyone()

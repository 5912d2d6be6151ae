"""A loop of gathers in which rank 1 misbehaves at step 2, for the hang doctor's tests.

Arguments: ``mode`` (``skip``: rank 1 skips that step's gather; ``sleep``: rank 1 sleeps
forever; ``kill``: rank 1 SIGKILLs itself while rank 0 waits in a barrier) and ``config``
(``env``: the timeout comes from the launcher; ``kwargs``: from
``InitProcessGroupKwargs(timeout=...)``, 10 s). Rank 0 prints ``HANG_START <unix time>`` when
it enters the collective that cannot complete.
"""

import datetime
import os
import signal
import sys
import time

import torch
from accel import Accelerator
from accel.utils import InitProcessGroupKwargs, gather

mode, config = sys.argv[1], sys.argv[2]
handlers = []
if config == "kwargs":
    handlers = [InitProcessGroupKwargs(timeout=datetime.timedelta(seconds=10))]
accelerator = Accelerator(cpu=True, kwargs_handlers=handlers)
rank = accelerator.process_index


def hang_starts() -> None:
    if rank == 0:
        print(f"HANG_START {time.time()}", flush=True)


def sleep_forever() -> None:
    while True:
        time.sleep(3600)


for step in range(4):
    x = torch.full((2, 3), float(step))
    if step == 2:
        if mode == "skip" and rank == 1:
            continue
        if mode == "sleep" and rank == 1:
            sleep_forever()
        if mode == "kill":
            if rank == 1:
                time.sleep(1)
                os.kill(os.getpid(), signal.SIGKILL)
            hang_starts()
            accelerator.wait_for_everyone()
        if mode == "skip" and rank == 0:
            hang_starts()  # rank 0's gathers run one ahead from here
        if mode == "sleep":
            hang_starts()
    gather(x)
accelerator.wait_for_everyone()
print("done", rank, flush=True)

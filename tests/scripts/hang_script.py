"""A loop of gathers in which rank 1 misbehaves at step 2, for the hang doctor's tests.

Arguments: ``mode`` (``skip``: rank 1 skips that step's gather; ``sleep``: rank 1 sleeps
forever; ``kill``: rank 1 SIGKILLs itself once rank 0 waits in a barrier) and ``config``
(``env``: the timeout comes from the launcher; ``kwargs``: from
``InitProcessGroupKwargs(timeout=...)``, 10 s). Rank 0 prints ``HANG_START <unix time>`` when
it enters the collective that cannot complete.
"""

import datetime
import os
import signal
import sys
import tempfile
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
            # Rank 1 dies only once rank 0 is about to wait, so that rank 0 is in the barrier
            # (not still on its way, which the launcher may cut short) when its peer is lost.
            ready = os.path.join(tempfile.gettempdir(), f"hang-ready-{os.environ['MASTER_PORT']}")
            if rank == 1:
                while not os.path.exists(ready):
                    time.sleep(0.05)
                time.sleep(0.5)
                os.remove(ready)
                os.kill(os.getpid(), signal.SIGKILL)
            hang_starts()
            open(ready, "w").close()
            accelerator.wait_for_everyone()
        if mode == "skip" and rank == 0:
            hang_starts()  # rank 0's gathers run one ahead from here
        if mode == "sleep":
            hang_starts()
    gather(x)
accelerator.wait_for_everyone()
print("done", rank, flush=True)

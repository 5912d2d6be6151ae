"""Leave the process group before the interpreter exits, the same way under either library.

A gloo group torn down by the interpreter's exit can abort the process ("terminate called
without an active exception") after the work is done, so the scripts destroy it themselves.

The closing sync is ``monitored_barrier`` on gloo, not ``barrier``: a plain barrier is run by
gloo's worker thread, which may still hold it (and the collectives queued before it) when this
thread goes on. If the group object is then freed while this thread holds the GIL (the DDP
wrapper keeps it alive until the garbage collector frees the model, and torch frees it without
releasing the GIL), the free joins that worker thread, which waits for the GIL to drop the
tensors of those collectives: both wait for ever. ``monitored_barrier`` sends and receives in
this thread, so the worker threads are idle when the group goes.
"""

from __future__ import annotations

import gc

import torch.distributed as dist


def leave_process_group() -> None:
    """Sync with the other processes, then destroy the default group (no-op without one)."""
    if not (dist.is_available() and dist.is_initialized()):
        return
    gc.collect()  # free the wrapped models now, while the group is still registered
    if dist.get_backend() == "gloo":
        dist.monitored_barrier(wait_all_ranks=True)
    else:
        dist.barrier()
    dist.destroy_process_group()

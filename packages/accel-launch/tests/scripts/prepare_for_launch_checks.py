"""Start 2 processes with torch.multiprocessing and accel_launch.PrepareForLaunch; each writes
what it saw to <out>/<mode>-<rank>.json.

    python prepare_for_launch_checks.py <multi|debug|ranks> <out> <port>
"""

import json
import os
import sys

import torch
import torch.multiprocessing as mp

from accel_launch import PrepareForLaunch


def work(out: str, mode: str) -> None:
    import torch.distributed as dist
    from accel_state import PartialState

    seen = {"rank_env": os.environ["RANK"], "local_rank_env": os.environ["LOCAL_RANK"]}
    if mode == "ranks":
        seen["fork_launched"] = os.environ["ACCEL_FORK_LAUNCHED"]
        with open(f"{out}/{mode}-{seen['rank_env']}.json", "w") as handle:
            json.dump(seen, handle)
        return
    grouped_before_state = dist.is_initialized()
    state = PartialState()
    value = torch.tensor([float(state.process_index + 1)])
    dist.all_reduce(value)
    seen.update(
        rank=state.process_index,
        world=state.num_processes,
        sum=value.item(),
        fork_launched=state.fork_launched,
        grouped_before_state=grouped_before_state,
    )
    with open(f"{out}/{mode}-{state.process_index}.json", "w") as handle:
        json.dump(seen, handle)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    mode, out, port = sys.argv[1:4]
    os.environ.update(WORLD_SIZE="2", MASTER_ADDR="127.0.0.1", MASTER_PORT=port, ACCEL_USE_CPU="1")
    if mode == "debug":
        prepared = PrepareForLaunch(work, debug=True)
    elif mode == "ranks":
        os.environ.update(NPROC="2", NODE_RANK="3")
        from accel_state import DistributedType

        prepared = PrepareForLaunch(work, distributed_type=DistributedType.MULTI_GPU)
    else:
        prepared = PrepareForLaunch(work, distributed_type="MULTI_CPU")
    mp.start_processes(prepared, args=(out, mode), nprocs=2, start_method="fork")

"""Run on 2 processes: checks every process-control feature of PartialState."""

import os
import sys
import time

import torch
import torch.distributed as dist

from accel_state import DistributedType, PartialState, set_seed, synchronize_rng_state

state = PartialState()
rank = state.process_index
assert state.num_processes == 2, state.num_processes
assert state.distributed_type is DistributedType.MULTI_CPU
assert state.backend == "gloo" and state.device == torch.device("cpu")
assert state.is_main_process == (rank == 0) and state.is_last_process == (rank == 1)
assert state.use_distributed and state.local_process_index == rank

# split_between_processes, seed 001 example
with state.split_between_processes(["a dog", "a cat", "a chicken"]) as prompts:
    assert prompts == [["a dog", "a cat"], ["a chicken"]][rank], prompts
with state.split_between_processes(["a dog", "a cat", "a chicken"], apply_padding=True) as p:
    assert p == [["a dog", "a cat"], ["a chicken", "a chicken"]][rank], p

# decorators
ran = []
state.on_main_process(lambda: ran.append("main"))()
state.on_last_process(lambda: ran.append("last"))()
state.on_process(process_index=1)(lambda: ran.append("p1"))()
state.on_local_main_process(lambda: ran.append("lmain"))()
assert ran == [["main", "lmain"], ["last", "p1"]][rank], ran

# main_process_first: the main process finishes its block before the other starts
marker = os.path.join(sys.argv[1], "marker")
with state.main_process_first():
    if rank == 0:
        time.sleep(0.5)
        open(marker, "w").close()
    else:
        assert os.path.exists(marker), "process 1 entered before process 0 finished"

# RNG synchronisation
set_seed(rank)  # different on purpose
synchronize_rng_state("torch")
value = torch.rand(1)
values = [torch.zeros(1), torch.zeros(1)]
dist.all_gather(values, value)
assert torch.equal(values[0], values[1]), values
set_seed(7, device_specific=True)
dist.all_gather(values, torch.rand(1))
assert not torch.equal(values[0], values[1])

state.wait_for_everyone()
print(f"rank {rank} OK", flush=True)

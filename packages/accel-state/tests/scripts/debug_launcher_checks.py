"""debug_launcher: 2 forked CPU processes form a gloo group; a failure in one is reported."""

import sys
from pathlib import Path

import torch
import torch.distributed as dist

from accel_state import PartialState, debug_launcher


def work(out_dir: str) -> None:
    state = PartialState()
    assert state.num_processes == 2 and state.distributed_type == "MULTI_CPU", state
    total = torch.tensor([state.process_index + 1.0])
    dist.all_reduce(total)
    Path(out_dir, f"rank{state.process_index}").write_text(str(total.item()))


def fail() -> None:
    if PartialState().process_index == 1:
        raise ValueError("failure in rank 1")


if __name__ == "__main__":
    parent = PartialState(cpu=True)  # the children must not inherit this single-process state
    assert parent.num_processes == 1
    debug_launcher(work, args=(sys.argv[1],), num_processes=2)
    try:
        debug_launcher(fail, num_processes=2)
    except Exception as err:
        assert "failure in rank 1" in str(err), err
    else:
        raise AssertionError("a failing process was not reported")
    print("OK", flush=True)

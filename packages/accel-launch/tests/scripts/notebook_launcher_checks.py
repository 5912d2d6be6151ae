"""notebook_launcher from a running Python process: ``python notebook_launcher_checks.py MODE
OUT_DIR [PORT NODE_RANK]``. Each started process writes ``OUT_DIR/<mode>-<rank>.json``; the
parent prints ``PARENT <json>`` with what it saw."""

import json
import os
import sys
from pathlib import Path

import torch
import torch.distributed as dist
from accel_state import AcceleratorState, PartialState

from accel_launch import notebook_launcher

MODE, OUT = sys.argv[1], Path(sys.argv[2])
PARENT = os.getpid()


def report(tag: str, **extra: object) -> None:
    """Join the group, check a collective, and write what this process saw."""
    state = AcceleratorState()
    total = torch.tensor([state.process_index + 1.0])
    if state.num_processes > 1:
        dist.all_reduce(total)
    row = {
        "rank": state.process_index,
        "world": state.num_processes,
        "local_rank": state.local_process_index,
        "distributed_type": str(state.distributed_type),
        "backend": state.backend,
        "mixed_precision": str(state.mixed_precision),
        "sum": total.item(),
        "same_process": os.getpid() == PARENT,
        "restart": os.environ.get("TORCHELASTIC_RESTART_COUNT"),
        "fork_launched": PartialState().fork_launched,
        **extra,
    }
    (OUT / f"{tag}-{state.process_index}.json").write_text(json.dumps(row))


def fail_once(marker: str) -> None:
    path = OUT / marker
    if PartialState().process_index == 0 and not path.exists():
        path.write_text("failed once")
        raise RuntimeError("first attempt fails on purpose")
    report("restart")


def always_fail() -> None:
    raise ZeroDivisionError("this training function always fails")


def parent_result(**values: object) -> None:
    print("PARENT " + json.dumps(values), flush=True)


if MODE == "two":
    secret = "closure value"  # a closure: only a forked process can run it

    notebook_launcher(
        lambda: report("two", secret=secret),
        num_processes=2,
        mixed_precision="bf16",
        use_port=str(sys.argv[3]),
    )
elif MODE == "in_process":
    notebook_launcher(report, args=("in_process",), num_processes=1, mixed_precision="fp16")
    parent_result(state_kept=AcceleratorState().initialized)
elif MODE == "restart":
    notebook_launcher(
        fail_once, args=("marker",), num_processes=2, max_restarts=1, use_port=sys.argv[3]
    )
    try:
        notebook_launcher(always_fail, num_processes=2, use_port=sys.argv[4])
    except Exception as err:
        parent_result(error_type=type(err).__name__, message=str(err))
elif MODE == "node":
    notebook_launcher(
        report,
        args=("node",),
        num_processes=1,
        num_nodes=2,
        node_rank=int(sys.argv[4]),
        use_port=sys.argv[3],
        rdzv_conf={"timeout": 120},
    )
elif MODE == "parent_group":
    dist.init_process_group("gloo", init_method=f"file://{OUT / 'store'}", rank=0, world_size=1)
    try:
        notebook_launcher(report, args=("never",), num_processes=2)
    except RuntimeError as err:
        parent_result(error_type="RuntimeError", message=str(err))
    dist.destroy_process_group()
elif MODE == "parent_accelerator":
    AcceleratorState(cpu=True)
    try:
        notebook_launcher(report, args=("never",), num_processes=2)
    except ValueError as err:
        parent_result(error_type="ValueError", message=str(err))
else:
    raise SystemExit(f"unknown mode {MODE!r}")

"""Run on 2 processes: ``OUT``. Process 1's random-state file is damaged; load_state must fail
on both processes (process 0 with an error naming process 1) and change nothing on either;
once the file is repaired, the load succeeds on both."""

import os
import shutil
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_common as common

from accel import CheckpointIntegrityError, CheckpointSyncError

OUT = sys.argv[1]


def snapshot(acc, model, optimizer, scheduler, loader, progress):
    return {
        "weights": {k: v.detach().clone() for k, v in model.state_dict().items()},
        "lr": [g["lr"] for g in optimizer.param_groups],
        "optimizer_state": {
            k: {n: t.clone() for n, t in v.items()}
            for k, v in optimizer.state_dict()["state"].items()
        },
        "last_epoch": scheduler.scheduler.last_epoch,
        "loader": loader.state_dict()["batches_yielded"],
        "progress": (progress.epoch, progress.step),
        "rng": torch.get_rng_state(),
    }


def same(a, b):
    assert a["weights"].keys() == b["weights"].keys()
    assert all(torch.equal(a["weights"][k], b["weights"][k]) for k in a["weights"])
    assert a["lr"] == b["lr"] and a["last_epoch"] == b["last_epoch"]
    assert a["loader"] == b["loader"] and a["progress"] == b["progress"]
    assert torch.equal(a["rng"], b["rng"])
    for key, state in a["optimizer_state"].items():
        assert all(torch.equal(t, b["optimizer_state"][key][n]) for n, t in state.items())


acc = common.fresh_accelerator(OUT, seed=1)
objs = common.build(acc)
common.train(acc, *objs, save_at=3)  # saves checkpoints/checkpoint_0 at step 3, trains on
for group in objs[1].param_groups:
    group["lr"] = 1e-5
before = snapshot(acc, *objs)
folder = os.path.join(OUT, "checkpoints", "checkpoint_0")
bad = os.path.join(folder, "random_states_1.pkl")
if acc.process_index == 1:
    shutil.copy(bad, bad + ".good")
    with open(bad, "r+b") as handle:  # same size, other bytes
        handle.seek(os.path.getsize(bad) // 2)
        handle.write(b"\xff" * 8)
dist.barrier()
try:
    acc.load_state(folder)
except CheckpointSyncError as exc:
    assert acc.process_index == 0, exc
    assert "process 1: CheckpointIntegrityError" in str(exc) and "random_states_1.pkl" in str(exc)
except CheckpointIntegrityError as exc:
    assert acc.process_index == 1, exc
    assert "random_states_1.pkl" in str(exc) and "checksum" in str(exc)
else:
    raise AssertionError("load_state succeeded although process 1's file is damaged")
same(before, snapshot(acc, *objs))
print(f"PASSED check_nothing_changed rank={acc.process_index}", flush=True)

if acc.process_index == 1:
    os.replace(bad + ".good", bad)
dist.barrier()
acc.load_state(folder)
assert objs[4].step == 3 and objs[1].param_groups[0]["lr"] != 1e-5
print(f"PASSED check_repaired_loads rank={acc.process_index}", flush=True)

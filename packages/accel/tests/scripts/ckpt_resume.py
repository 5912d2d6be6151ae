"""Run on 2 processes. ``full OUT``: train uninterrupted, saving mid-epoch at step SAVE_AT.
``resume OUT``: a fresh run loads that checkpoint, trains to the end and compares batches and
weights with the full run; then checks that misuse fails with clear errors instead of hanging.
"""

import json
import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_common as common

from accel import CheckpointSyncError

MODE, OUT = sys.argv[1], sys.argv[2]
SAVE_AT = 7  # 5 steps per epoch on each process: step 7 is in the middle of the second epoch


def results_path(rank):
    return os.path.join(OUT, f"full_{rank}.json")


def full():
    acc = common.fresh_accelerator(OUT, seed=1)
    objs = common.build(acc)
    seen = common.train(acc, *objs, save_at=SAVE_AT)
    with open(results_path(acc.process_index), "w") as handle:
        json.dump(seen[SAVE_AT:], handle)
    if acc.is_main_process:
        torch.save(common.weights(acc, objs[0]), os.path.join(OUT, "final.pt"))
    acc.wait_for_everyone()


def resume():
    acc = common.fresh_accelerator(OUT, seed=777)
    model, *rest = common.build(acc)
    acc.load_state()
    seen = common.train(acc, model, *rest)
    with open(results_path(acc.process_index)) as handle:
        expected = json.load(handle)
    assert seen == expected, (seen, expected)
    final = torch.load(os.path.join(OUT, "final.pt"), weights_only=True)
    mine = common.weights(acc, model)
    assert all(torch.equal(final[k], mine[k]) for k in final), "weights differ"
    print(f"PASSED check_exact_resume rank={acc.process_index}", flush=True)
    return acc


def failure_on_one_process(acc):
    def hook(models, weights, output_dir):
        if acc.process_index == 1:
            raise OSError("disk full (simulated)")

    handle = acc.register_save_state_pre_hook(hook)
    target = os.path.join(OUT, "failing")
    try:
        acc.save_state(target)
    except CheckpointSyncError as exc:
        assert acc.process_index == 0 and "process 1: OSError: disk full" in str(exc), exc
    except OSError as exc:
        assert acc.process_index == 1 and "disk full" in str(exc), exc
    else:
        raise AssertionError("save_state succeeded although process 1 failed")
    handle.remove()
    assert not os.path.exists(target)
    acc.wait_for_everyone()
    print(f"PASSED check_failure_reported rank={acc.process_index}", flush=True)


def called_on_one_process(acc):
    # The usual mistake: save_state under `if is_main_process`. Process 0 must raise after
    # the timeout (ACCEL_CHECKPOINT_TIMEOUT=5) instead of hanging; process 1 waits here.
    if acc.is_main_process:
        try:
            acc.save_state(os.path.join(OUT, "lonely"))
        except CheckpointSyncError as exc:
            assert "must be called on every process" in str(exc), exc
            assert "processes [1] of 2 never reached it" in str(exc), exc
        else:
            raise AssertionError("save_state on one process did not fail")
    dist.barrier()
    assert not os.path.exists(os.path.join(OUT, "lonely"))
    print(f"PASSED check_one_process_call rank={acc.process_index}", flush=True)


def later_accelerators_agree(acc):
    # After the failed lone call, a collective save still meets; then two new Accelerator
    # objects in the same processes (one process group, one store) each load a checkpoint:
    # their rendezvous keys must not collide with the earlier objects' keys.
    target = os.path.join(OUT, "after_misuse")
    acc.save_state(target)
    for seed in (5, 6):
        acc = common.fresh_accelerator(OUT, seed=seed)
        acc.project_configuration.automatic_checkpoint_naming = False
        common.build(acc)
        acc.load_state(target)
        acc.save_state(os.path.join(OUT, f"again_{seed}"))
    print(f"PASSED check_later_accelerators rank={acc.process_index}", flush=True)


if MODE == "full":
    full()
else:
    accelerator = resume()
    accelerator.project_configuration.automatic_checkpoint_naming = False  # explicit folders
    failure_on_one_process(accelerator)
    called_on_one_process(accelerator)
    later_accelerators_agree(accelerator)

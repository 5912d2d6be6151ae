"""Run on 2 processes: asynchronous saves while training goes on, then exact resumes.

DDP: a run saves asynchronously mid-epoch (through ``ProjectConfiguration.async_save``) and
trains on while the files are written; a fresh run loads that checkpoint and must see the same
batches and end with bit-identical weights. FSDP2 (sharded and full state dicts): the same
with ``save_state(folder, async_save=True)``, comparing every later loss and the final weights.
Last, a save is started and the script ends at once: it must still be committed.
"""

import os
import sys

import torch
import torch.distributed as dist

sys.path.insert(0, os.path.dirname(__file__))
import ckpt_common as common
from fsdp_checks import Net, plugin

OUT = sys.argv[1]
SAVE_AT = 7  # mid-epoch of the second epoch (5 steps per epoch on each process)


def check_ddp_exact_resume():
    acc = common.fresh_accelerator(OUT, seed=1)
    acc.project_configuration.async_save = True
    objs = common.build(acc)
    seen = common.train(acc, *objs, save_at=SAVE_AT)  # trains on while the save is written
    assert isinstance(acc._checkpointer.pending_save.path, str)
    acc.end_training()  # waits for the write
    final = common.weights(acc, objs[0])

    acc = common.fresh_accelerator(OUT, seed=777)
    model, *rest = common.build(acc)
    acc.load_state()
    assert acc.project_configuration.iteration == 1
    resumed = common.train(acc, model, *rest)
    assert resumed == seen[SAVE_AT:], (resumed, seen[SAVE_AT:])
    mine = common.weights(acc, model)
    assert all(torch.equal(final[k], mine[k]) for k in final), "weights differ"


def fsdp_run(kind, seed):
    acc = common.fresh_accelerator(OUT, seed=seed, fsdp_plugin=plugin(2))
    acc.project_configuration.automatic_checkpoint_naming = False  # save to the folder given
    acc.state.fsdp_plugin.set_state_dict_type(kind)
    torch.manual_seed(seed)
    model = Net()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-2)
    model, opt = acc.prepare(model, opt)
    g = torch.Generator().manual_seed(dist.get_rank())
    batches = [torch.randn(4, 8, generator=g) for _ in range(8)]
    return acc, model, opt, batches


def fsdp_steps(acc, model, opt, batches):
    losses = []
    for x in batches:
        loss = model(x).pow(2).mean()
        acc.backward(loss)
        opt.step()
        opt.zero_grad()
        losses.append(loss.item())
    return losses


def check_fsdp_resume(kind):
    folder = os.path.join(OUT, f"fsdp_{kind}")
    acc, model, opt, batches = fsdp_run(kind, seed=0)
    fsdp_steps(acc, model, opt, batches[:4])
    handle = acc.save_state(folder, async_save=True)
    later = fsdp_steps(acc, model, opt, batches[4:])  # collectives while the files are written
    assert handle.wait() == folder
    final = acc.get_state_dict(model)

    acc, model, opt, batches = fsdp_run(kind, seed=5)  # other weights: all must come back
    acc.load_state(folder)
    assert fsdp_steps(acc, model, opt, batches[4:]) == later, kind
    mine = acc.get_state_dict(model)
    assert mine.keys() == final.keys() and all(torch.equal(final[k], mine[k]) for k in final)


checks = [
    ("ddp_exact_resume", check_ddp_exact_resume),
    ("fsdp_sharded_resume", lambda: check_fsdp_resume("SHARDED_STATE_DICT")),
    ("fsdp_full_resume", lambda: check_fsdp_resume("FULL_STATE_DICT")),
]
for name, check in checks:
    check()
    print(f"PASSED check_{name} rank={dist.get_rank()}", flush=True)

# The interpreter does not exit before a save in flight is committed (checked by the test).
acc, model, opt, batches = fsdp_run("SHARDED_STATE_DICT", seed=0)
acc.save_state(os.path.join(OUT, "at_exit"), async_save=True)

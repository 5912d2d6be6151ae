"""Launched by tests/test_megatron_engine.py with ``--use_megatron_lm`` on 2 CPU processes: the
Megatron-LM engine forms megatron-core's groups, trains a tiny model with tensor-parallel degree
1 and data parallelism 2 exactly as a plain single-process run of the same data would, follows
megatron-core's learning-rate schedule, and round-trips ``save_state`` / ``load_state``.

Prints ``MEGATRON rank=<r> ok`` when every check of this process holds."""

import copy
import os
import sys

import torch
from accel import Accelerator
from accel.utils import MegatronLMDummyScheduler, avg_losses_across_data_parallel_group
from accel.utils.megatron_lm import gather_across_data_parallel_groups
from torch.utils.data import DataLoader, TensorDataset

folder = sys.argv[1]
torch.manual_seed(0)
data = TensorDataset(torch.randn(16, 4), torch.randn(16, 2))
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 2))
plain = copy.deepcopy(model)
optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
plain_optimizer = torch.optim.SGD(plain.parameters(), lr=0.5)
scheduler = MegatronLMDummyScheduler(optimizer, total_num_steps=8, warmup_num_steps=2)

accelerator = Accelerator()
plugin = accelerator.state.megatron_lm_plugin
assert accelerator.distributed_type.value == "MEGATRON_LM", accelerator.distributed_type
assert plugin.gradient_clipping == 0.25, plugin.gradient_clipping  # from the launcher flag
model, optimizer, loader, scheduler = accelerator.prepare(
    model, optimizer, DataLoader(data, batch_size=2), scheduler
)

from megatron.core import parallel_state  # noqa: E402 - after prepare formed the groups

assert parallel_state.model_parallel_is_initialized()
assert parallel_state.get_tensor_model_parallel_world_size() == 1
assert parallel_state.get_pipeline_model_parallel_world_size() == 1
assert parallel_state.get_data_parallel_world_size() == 2
assert parallel_state.get_data_parallel_rank() == accelerator.process_index
assert type(model).__name__ == "DistributedDataParallel"
assert (plugin.train_iters, plugin.lr_warmup_iters) == (4, 1)  # 8 and 2 steps over 2 replicas


def train_step(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """One step of the prepared objects, and the same step of the plain model on the batches
    of both ranks (the data-parallel mean of the two losses is the loss of the whole batch)."""
    lr = scheduler.get_last_lr()[0]
    loss = torch.nn.functional.mse_loss(model(x), y)
    accelerator.backward(loss)
    optimizer.step()
    scheduler.step()
    optimizer.zero_grad()
    xs, ys = gather_across_data_parallel_groups((x, y))
    plain_loss = torch.nn.functional.mse_loss(plain(xs), ys)
    plain_loss.backward()
    torch.nn.utils.clip_grad_norm_(plain.parameters(), 0.25)
    for group in plain_optimizer.param_groups:
        group["lr"] = lr
    plain_optimizer.step()
    plain_optimizer.zero_grad()
    averaged = avg_losses_across_data_parallel_group([loss])
    assert torch.allclose(averaged[0], plain_loss, atol=1e-6), (averaged, plain_loss)
    return loss


def same_weights() -> bool:
    mine = accelerator.unwrap_model(model).state_dict()
    return all(torch.allclose(mine[k], v, atol=1e-6) for k, v in plain.state_dict().items())


batches = list(loader)
assert len(batches) == 4 and all(len(x) == 2 for x, _ in batches)
lrs = []
for x, y in batches[:2]:
    lrs.append(scheduler.get_last_lr()[0])
    train_step(x, y)
assert lrs == [0.0, 0.5], lrs  # megatron-core's linear warmup over 1 iteration, from 0
assert same_weights()
accelerator.save_state(os.path.join(folder, "ckpt"))
after_save = scheduler.get_last_lr()[0]
assert abs(after_save - 0.5 * 2 / 3) < 1e-9, after_save  # linear decay over 3 iterations
saved_plain = copy.deepcopy(plain.state_dict())
train_step(*batches[2])
expected = {k: v.clone() for k, v in accelerator.unwrap_model(model).state_dict().items()}

accelerator.load_state(os.path.join(folder, "ckpt"))
assert scheduler.get_last_lr()[0] == after_save
plain.load_state_dict(saved_plain)
train_step(*batches[2])
again = accelerator.unwrap_model(model).state_dict()
assert all(torch.equal(again[k], v) for k, v in expected.items())
os.write(1, f"MEGATRON rank={accelerator.process_index} ok\n".encode())
accelerator.wait_for_everyone()

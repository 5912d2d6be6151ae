"""Run on 2 processes. LocalSGD against a hand-written local SGD (each process trains its own
copy on its own batches, parameters all-reduced and divided by 2 every k steps), and
LocalSGD(enabled=False) against plain DDP."""

import copy

import torch
import torch.distributed as dist
from accel_state import AcceleratorState, GradientState
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel.local_sgd import LocalSGD

STEPS = 7


def fresh():
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    return Accelerator(cpu=True)


def parts():
    torch.manual_seed(0)  # same initial weights on both processes
    model = torch.nn.Sequential(torch.nn.Linear(6, 12), torch.nn.Tanh(), torch.nn.Linear(12, 1))
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 6, generator=g)
    data = TensorDataset(x, x.sum(dim=1, keepdim=True) ** 2)
    return model, DataLoader(data, batch_size=4, shuffle=False)


def train(acc, model, optimizer, loader, local_sgd=None, after_step=None):
    """STEPS steps; returns the batches seen by this process."""
    seen = []
    for step, (x, y) in enumerate(loader, start=1):
        loss = torch.nn.functional.mse_loss(model(x), y)
        acc.backward(loss)
        optimizer.step()
        optimizer.zero_grad()
        if local_sgd is not None:
            local_sgd.step()
        seen.append((x, y))
        if after_step is not None:
            after_step(step)
        if step == STEPS:
            break
    return seen


def by_hand(model, batches, k):
    """Local SGD written out: train alone, all_reduce(SUM) / 2 every k steps and at the end."""
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    world = dist.get_world_size()

    def average():
        with torch.no_grad():
            for p in model.parameters():
                dist.all_reduce(p.data, op=dist.ReduceOp.SUM)
                p.data /= world

    for step, (x, y) in enumerate(batches, start=1):
        torch.nn.functional.mse_loss(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        if step % k == 0:
            average()
    if len(batches) % k:
        average()
    return model


def same_on_both(tensor):
    both = [torch.empty_like(tensor) for _ in range(2)]
    dist.all_gather(both, tensor.detach().contiguous())
    return torch.equal(both[0], both[1])


def params(model):
    return [p.detach().clone() for p in model.parameters()]


def check_matches_hand_written(k):
    acc = fresh()
    model, loader = parts()
    initial = copy.deepcopy(model)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    model, optimizer, loader = acc.prepare(model, optimizer, loader)
    diverged = []

    def after_step(step):
        first = next(model.parameters())
        diverged.append((step, same_on_both(first)))

    with LocalSGD(acc, model, local_sgd_steps=k) as local_sgd:
        seen = train(acc, model, optimizer, loader, local_sgd, after_step)
    expected = by_hand(initial, seen, k)
    mine, theirs = params(acc.unwrap_model(model)), params(expected)
    assert all(torch.equal(a, b) for a, b in zip(mine, theirs)), [
        (a - b).abs().max().item() for a, b in zip(mine, theirs)
    ]
    # Between averagings the replicas differ (no gradient all-reduce), after one they agree.
    assert all(same == (step % k == 0) for step, same in diverged), diverged
    assert all(same_on_both(p) for p in mine)
    assert local_sgd.num_steps == STEPS
    print(f"PASSED local_sgd k={k} rank={acc.process_index}", flush=True)


def check_disabled_is_ddp():
    results = []
    for use_local_sgd in (True, False):
        acc = fresh()
        model, loader = parts()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        model, optimizer, loader = acc.prepare(model, optimizer, loader)
        if use_local_sgd:
            with LocalSGD(acc, model, local_sgd_steps=2, enabled=False) as local_sgd:
                train(acc, model, optimizer, loader, local_sgd)
        else:
            train(acc, model, optimizer, loader)
        results.append(params(acc.unwrap_model(model)))
    assert all(torch.equal(a, b) for a, b in zip(*results))
    assert all(same_on_both(p) for p in results[0])
    print(f"PASSED disabled_is_ddp rank={dist.get_rank()}", flush=True)


for k in (1, 3):
    check_matches_hand_written(k)
check_disabled_is_ddp()

"""What transformers' ``Trainer`` calls on the Accelerator, on one process: ``free_memory`` at
the start of every ``train()``, and the LOMO path (``backward(loss, learning_rate=...)`` then
``optimizer.step()``, as ``Trainer`` does with ``optim="lomo"``)."""

import copy
import gc

import pytest
import torch

from accel import Accelerator


def test_free_memory_collects_garbage_once() -> None:
    acc = Accelerator(cpu=True)
    model = torch.nn.Linear(4, 1)
    acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
    full: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    was_enabled = gc.isenabled()
    gc.disable()  # only explicit collections are counted
    gc.callbacks.append(count)
    try:
        acc.free_memory()
    finally:
        gc.callbacks.remove(count)
        if was_enabled:
            gc.enable()
    # Each full collection walks every object of the process (about 1.5 s under transformers
    # on a busy machine): one is what releasing memory needs.
    assert len(full) == 1


def test_lomo_through_backward_with_a_learning_rate_and_a_no_op_step() -> None:
    lomo_optim = pytest.importorskip("lomo_optim", reason="needs lomo-optim")
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Tanh(), torch.nn.Linear(8, 1))
    reference = copy.deepcopy(model)
    x, y = torch.randn(16, 4), torch.randn(16, 1)
    acc = Accelerator(cpu=True)
    model, optimizer = acc.prepare(model, lomo_optim.Lomo(model, lr=0.1))
    acc.backward(torch.nn.functional.mse_loss(model(x), y), learning_rate=0.1)
    optimizer.step()  # the update happened in the backward pass: step does nothing
    optimizer.zero_grad()
    torch.nn.functional.mse_loss(reference(x), y).backward()
    with torch.no_grad():
        for p in reference.parameters():
            p -= 0.1 * p.grad
    for mine, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(mine, expected)

"""Preparing an already prepared object returns it as is and registers it once; unwrap_model
removes DataParallel and compile wrappers with the reference's signature."""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.data import DataLoader

from accel import Accelerator


def _objects() -> tuple[nn.Module, torch.optim.Optimizer, object, DataLoader]:
    model = nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
    loader = DataLoader(list(range(8)), batch_size=2)
    return model, optimizer, scheduler, loader


def _counts(accelerator: Accelerator) -> tuple[int, int, int, int]:
    return (
        len(accelerator._models),
        len(accelerator._optimizers),
        len(accelerator._schedulers),
        len(accelerator._dataloaders),
    )


def test_second_prepare_returns_the_same_objects_and_registers_once():
    accelerator = Accelerator(cpu=True)
    first = accelerator.prepare(*_objects())
    assert _counts(accelerator) == (1, 1, 1, 1)
    second = accelerator.prepare(*first)
    assert all(a is b for a, b in zip(first, second, strict=True))
    assert _counts(accelerator) == (1, 1, 1, 1)
    assert all(getattr(obj, "_is_accelerate_prepared", False) for obj in first)


def test_prepare_methods_one_by_one_recognise_prepared_objects():
    accelerator = Accelerator(cpu=True)
    model, optimizer, scheduler, loader = accelerator.prepare(*_objects())
    assert accelerator.prepare_model(model) is model
    assert accelerator.prepare_optimizer(optimizer) is optimizer
    assert accelerator.prepare_scheduler(scheduler) is scheduler
    assert accelerator.prepare_data_loader(loader) is loader
    assert _counts(accelerator) == (1, 1, 1, 1)


def test_prepared_loader_is_not_sharded_again():
    accelerator = Accelerator(cpu=True)
    loader = accelerator.prepare(DataLoader(list(range(8)), batch_size=2))
    again = accelerator.prepare(loader)
    assert again is loader and [b.tolist() for b in again] == [[0, 1], [2, 3], [4, 5], [6, 7]]


def test_object_prepared_by_another_accelerator_is_registered_here():
    model = Accelerator(cpu=True).prepare(nn.Linear(2, 2))
    other = Accelerator(cpu=True)
    assert other.prepare(model) is model and other._models == [model]


def test_new_objects_beside_prepared_ones_are_still_prepared():
    accelerator = Accelerator(cpu=True)
    model = accelerator.prepare(nn.Linear(2, 2))
    extra = nn.Linear(2, 2)
    same, prepared = accelerator.prepare(model, extra)
    assert same is model and prepared is extra and accelerator._models == [model, extra]


def test_unwrap_model_removes_data_parallel_and_compile():
    accelerator = Accelerator(cpu=True)
    model = nn.Linear(2, 2)
    assert accelerator.unwrap_model(nn.DataParallel(model)) is model
    compiled = torch.compile(nn.DataParallel(model))
    assert accelerator.unwrap_model(compiled) is compiled and compiled._orig_mod is model
    assert accelerator.unwrap_model(compiled, keep_torch_compile=False) is model


def test_unwrap_model_keep_fp32_wrapper_false_restores_forward():
    accelerator = Accelerator(cpu=True, mixed_precision="bf16")
    model = nn.Linear(2, 2)
    own_forward = model.forward
    prepared = accelerator.prepare(model)
    assert prepared.forward != own_forward
    unwrapped = accelerator.unwrap_model(prepared, keep_fp32_wrapper=False)
    assert unwrapped is model and unwrapped.forward == own_forward

"""A training step through the Accelerator does the work of a plain PyTorch step and no more.

In full precision without accumulation the step must not enter autocast, divide the loss, go
through a grad scaler or run collectives: the ATen ops it runs are those of the plain loop.
"""

import importlib.util
from pathlib import Path

import pytest
import torch
from accel_state import AcceleratorState, GradientState
from torch.profiler import ProfilerActivity, profile
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator


def model_and_opt():
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    return model, torch.optim.AdamW(model.parameters(), lr=1e-3)


def batches():
    g = torch.Generator().manual_seed(0)
    return TensorDataset(torch.randn(64, 8, generator=g), torch.randint(0, 3, (64,), generator=g))


def _step_op_counts():
    path = Path(__file__).parent / "scripts" / "step_ops.py"
    spec = importlib.util.spec_from_file_location("step_ops", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.step_op_counts


def op_counts(model, opt, loader, backward):
    batches = list(loader)[:4]
    return _step_op_counts()(model, opt, batches, torch.nn.functional.cross_entropy, backward)


def test_full_precision_step_runs_the_ops_of_a_plain_step():
    model, opt = model_and_opt()
    plain = op_counts(model, opt, DataLoader(batches(), batch_size=8), lambda loss: loss.backward())

    acc = Accelerator(cpu=True)
    model, opt = model_and_opt()
    model, opt, loader = acc.prepare(model, opt, DataLoader(batches(), batch_size=8))
    ours = op_counts(model, opt, loader, acc.backward)

    assert ours == plain, {
        "only in the Accelerator step": ours - plain,
        "only in the plain step": plain - ours,
    }


def test_full_precision_leaves_forward_unwrapped():
    acc = Accelerator(cpu=True, mixed_precision="no")
    model = acc.prepare(torch.nn.Linear(2, 2))
    assert not hasattr(model, "_accel_original_forward")
    assert model.forward.__func__ is torch.nn.Linear.forward
    assert acc.scaler is None


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
def test_mixed_precision_wraps_forward_in_autocast(precision):
    acc = Accelerator(cpu=True, mixed_precision=precision)
    model = acc.prepare(torch.nn.Linear(2, 2))
    assert hasattr(model, "_accel_original_forward")
    assert model.forward.__func__ is not torch.nn.Linear.forward


def test_backward_divides_the_loss_only_when_accumulating():
    def div_ops(steps):
        AcceleratorState._reset_state(reset_partial_state=True)
        GradientState._reset_state()
        acc = Accelerator(cpu=True, gradient_accumulation_steps=steps)
        model = acc.prepare(torch.nn.Linear(2, 1))
        loss = model(torch.ones(1, 2)).sum()
        with profile(activities=[ProfilerActivity.CPU]) as prof:
            acc.backward(loss)
        return sum(e.count for e in prof.key_averages() if e.key == "aten::div")

    assert div_ops(1) == 0
    assert div_ops(2) > 0  # the division and its backward

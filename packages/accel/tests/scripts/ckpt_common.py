"""A small training run with shuffling, dropout, an LR schedule and numpy/python randomness,
shared by the exact-resume tests on one and two processes."""

import random

import numpy as np
import torch
from accel_state import AcceleratorState, GradientState, set_seed
from torch.utils.data import DataLoader, TensorDataset

from accel import Accelerator
from accel.utils import ProjectConfiguration

EPOCHS = 3
SAMPLES = 40
BATCH = 4


class Progress:
    """Where the loop stands; saved through register_for_checkpointing."""

    def __init__(self):
        self.epoch = 0
        self.step = 0

    def state_dict(self):
        return {"epoch": self.epoch, "step": self.step}

    def load_state_dict(self, state):
        self.epoch, self.step = state["epoch"], state["step"]


def fresh_accelerator(project_dir, seed, **kwargs):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    config = ProjectConfiguration(project_dir=project_dir, automatic_checkpoint_naming=True)
    accelerator = Accelerator(project_config=config, **kwargs)
    set_seed(seed)
    return accelerator


def build(accelerator, batch_size=BATCH):
    """Model, optimizer, scheduler, loader and progress, prepared and registered."""
    g = torch.Generator().manual_seed(0)
    x = torch.randn(SAMPLES, 4, generator=g)
    y = x @ torch.tensor([[1.0], [-2.0], [3.0], [0.5]])
    dataset = TensorDataset(torch.arange(SAMPLES), x, y)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.3), torch.nn.Linear(16, 1)
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=0.05)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=3, gamma=0.7)
    loader = DataLoader(dataset, batch_size=batch_size, shuffle=True)
    model, optimizer, scheduler, loader = accelerator.prepare(model, optimizer, scheduler, loader)
    progress = Progress()
    accelerator.register_for_checkpointing(progress)
    return model, optimizer, scheduler, loader, progress


def train(accelerator, model, optimizer, scheduler, loader, progress, save_at=None):
    """Train to the end; return the sample indices of every step after ``save_at``."""
    seen = []
    for epoch in range(progress.epoch, EPOCHS):
        progress.epoch = epoch
        for idx, x, y in loader:
            noise = 1.0 + 0.01 * float(np.random.randn()) + 0.01 * random.random()
            out = model(x * noise)
            loss = torch.nn.functional.mse_loss(out, y)
            accelerator.backward(loss)
            optimizer.step()
            scheduler.step()
            optimizer.zero_grad()
            progress.step += 1
            seen.append(idx.tolist())
            if save_at is not None and progress.step == save_at:
                accelerator.save_state()
        progress.epoch = epoch + 1
    return seen


def weights(accelerator, model):
    return {k: v.detach().clone() for k, v in accelerator.get_state_dict(model).items()}

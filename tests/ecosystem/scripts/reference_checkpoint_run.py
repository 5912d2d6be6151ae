"""Train a few steps and ``save_state``, or ``load_state`` the latest checkpoint and go on.

Run with ``ACCEL_AS_ACCELERATE=0`` the script trains on the reference library; with ``=1`` on
accel. ``save``: 5 steps, ``save_state()`` (automatic naming), then 5 more steps (the
uninterrupted run). ``resume``: ``load_state()`` of the latest checkpoint, then the same 5
steps. Prints one ``RESULT`` line (JSON) on the main process: the losses of every process, the
random draws after the load, the step, the learning rate, the registered object's state and a
digest of the weights.

Usage: ``reference_checkpoint_run.py save|resume PROJECT_DIR [--bin] [--stateful]``
"""

from __future__ import annotations

import hashlib
import json
import random
import sys

import numpy as np
import torch
from accelerate import Accelerator
from accelerate.utils import DataLoaderConfiguration, ProjectConfiguration, set_seed

STEPS = 5


class Counter:
    """A registered object: its state is a plain dict."""

    def __init__(self) -> None:
        self.seen = 0

    def state_dict(self) -> dict[str, int]:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seen = state["seen"]


def main() -> None:
    mode, project = sys.argv[1], sys.argv[2]
    stateful = "--stateful" in sys.argv
    set_seed(0)
    models = [
        torch.nn.Sequential(
            torch.nn.Linear(4, 16), torch.nn.Dropout(0.3), torch.nn.ReLU(), torch.nn.Linear(16, 1)
        ),
        torch.nn.Linear(1, 1),
    ]
    optimizers = [
        torch.optim.AdamW(models[0].parameters(), lr=1e-2),
        torch.optim.SGD(models[1].parameters(), lr=0.1),
    ]
    scheduler = torch.optim.lr_scheduler.StepLR(optimizers[0], 2, gamma=0.5)
    data = torch.utils.data.TensorDataset(torch.randn(96, 4), torch.randn(96, 1))
    loader = torch.utils.data.DataLoader(data, batch_size=4)
    accelerator = Accelerator(
        cpu=True,
        project_config=ProjectConfiguration(project_dir=project, automatic_checkpoint_naming=True),
        dataloader_config=DataLoaderConfiguration(use_stateful_dataloader=stateful),
    )
    *models, opt0, opt1, scheduler, loader = accelerator.prepare(
        *models, *optimizers, scheduler, loader
    )
    counter = Counter()
    accelerator.register_for_checkpointing(counter)
    result: dict = {"accelerate_file": __import__("accelerate").__file__}
    if mode == "resume":
        accelerator.load_state()
        result["step"] = accelerator.step
        result["seen"] = counter.seen
        result["lr"] = scheduler.get_last_lr()
        if not stateful:
            loader = accelerator.skip_first_batches(loader, STEPS)
    losses, todo = [], STEPS if mode == "resume" else 2 * STEPS
    for x, y in loader:
        with accelerator.accumulate(*models):
            loss = torch.nn.functional.mse_loss(models[1](models[0](x)), y)
            accelerator.backward(loss)
            for opt in (opt0, opt1):
                opt.step()
                opt.zero_grad()
            scheduler.step()
        counter.seen += 1
        losses.append(accelerator.gather(loss.detach()[None]).tolist())
        if mode == "save" and len(losses) == STEPS:
            accelerator.save_state(safe_serialization="--bin" not in sys.argv)
        if len(losses) == todo:
            break
    result["losses"] = losses[-STEPS:]
    result["draws"] = [random.random(), float(np.random.rand()), torch.rand(2).tolist()]
    digest = hashlib.sha256()
    for model in models:
        for tensor in accelerator.unwrap_model(model).state_dict().values():
            digest.update(tensor.detach().cpu().numpy().tobytes())
    result["weights"] = digest.hexdigest()
    result["num_processes"] = accelerator.num_processes
    if accelerator.is_main_process:
        print("RESULT " + json.dumps(result), flush=True)


if __name__ == "__main__":
    main()

"""A small training job that says where it ran: one line per process with its rank, the
world size, how the processes were started, and the loss at the first and last step.

The same file runs under every launcher of ``examples/slurm/``: ``srun``, ``sbatch``,
``mpirun`` or plain ``accel launch``. Each process prints::

    RESULT {"rank": 0, "world_size": 2, "launcher": "torchrun", "first_loss": ..., ...}
"""

from __future__ import annotations

import argparse
import json
import os
import socket

import torch
from accel import Accelerator
from accel.utils import set_seed
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--lr", type=float, default=0.05)
    args = parser.parse_args()

    accelerator = Accelerator(cpu=True)
    set_seed(0)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(512, 8, generator=g)
    y = x @ torch.linspace(-1, 1, 8) + 0.01 * torch.randn(512, generator=g)
    loader = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
    model = torch.nn.Linear(8, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)

    losses: list[float] = []
    while len(losses) < args.steps:
        for inputs, targets in loader:
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(model(inputs).squeeze(-1), targets)
            accelerator.backward(loss)
            optimizer.step()
            losses.append(accelerator.reduce(loss.detach(), "mean").item())
            if len(losses) == args.steps:
                break
    launcher = "torchrun" if "TORCHELASTIC_RUN_ID" in os.environ else "direct"
    if "OMPI_COMM_WORLD_SIZE" in os.environ:
        launcher = "mpirun"
    elif launcher == "direct" and "SLURM_STEP_ID" in os.environ:
        launcher = "srun"
    record = {
        "rank": accelerator.process_index,
        "world_size": accelerator.num_processes,
        "local_rank": accelerator.local_process_index,
        "host": socket.gethostname(),
        "launcher": launcher,
        "slurm_job_id": os.environ.get("SLURM_JOB_ID"),
        "first_loss": losses[0],
        "last_loss": losses[-1],
    }
    print("RESULT " + json.dumps(record), flush=True)
    accelerator.end_training()


if __name__ == "__main__":
    main()

"""A training run that checkpoints every few steps and resumes from the newest checkpoint.

Arguments: ``project_dir``. Environment (test knobs):

- ``FT_KILL_RANK`` / ``FT_KILL_STEP``: that rank SIGKILLs itself at that step, on the first
  attempt only (``TORCHELASTIC_RESTART_COUNT`` 0).
- ``FT_KILL_DURING``: ``step`` (default, before the step's forward) or ``save`` (inside the
  save of that step, after the files started being written).
- ``FT_STOP_STEP``: every process returns after the checkpoint of that step (a job stopped on
  purpose, to resume it on another number of processes).

The per-process batch size is ``8 // WORLD_SIZE``, so the total batch is 8 on 1 or 2 processes.

Each process appends ``<attempt> <rank> <step> <sample indices>`` lines to
``<project_dir>/batches_<rank>.log``; the main process writes the final weights to
``<project_dir>/final.safetensors``.
"""

import os
import signal
import sys

import torch
from accel import Accelerator
from accel.utils import ProjectConfiguration, set_seed
from safetensors.torch import save_file
from torch.utils.data import DataLoader, Dataset

EPOCHS = 2
EVERY = 3


class Indexed(Dataset):
    """Samples that carry their own index, so each step can log what it saw."""

    def __init__(self, n: int = 48) -> None:
        generator = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 4, generator=generator)
        self.y = self.x @ torch.tensor([1.0, -2.0, 0.5, 3.0]) + 0.1

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        return {"index": i, "x": self.x[i], "y": self.y[i]}


class Progress:
    """Epoch and step counters saved with the checkpoint."""

    def __init__(self) -> None:
        self.epoch = 0
        self.step = 0

    def state_dict(self) -> dict:
        return {"epoch": self.epoch, "step": self.step}

    def load_state_dict(self, state: dict) -> None:
        self.epoch, self.step = state["epoch"], state["step"]


def main(project_dir: str) -> None:
    set_seed(0)
    config = ProjectConfiguration(project_dir=project_dir, automatic_checkpoint_naming=True)
    accelerator = Accelerator(cpu=True, project_config=config)
    model = torch.nn.Linear(4, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    per_process = 8 // int(os.environ.get("WORLD_SIZE", "1"))
    loader = DataLoader(Indexed(), batch_size=per_process, shuffle=True)
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    progress = Progress()
    accelerator.register_for_checkpointing(progress)
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    rank = accelerator.process_index
    kill = attempt == 0 and str(rank) == os.environ.get("FT_KILL_RANK")
    kill_step = int(os.environ.get("FT_KILL_STEP", "-1"))
    during = os.environ.get("FT_KILL_DURING", "step")
    stop_step = int(os.environ.get("FT_STOP_STEP", "-1"))
    if kill and during == "save":

        def die_while_saving(models, weights, folder):
            if progress.step == kill_step:
                os.kill(os.getpid(), signal.SIGKILL)

        accelerator.register_save_state_pre_hook(die_while_saving)
    accelerator.load_state("latest")
    log = open(os.path.join(project_dir, f"batches_{rank}.log"), "a", encoding="utf-8")
    print(f"attempt {attempt} rank {rank} resumes at step {progress.step}", flush=True)
    while progress.epoch < EPOCHS:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(progress.epoch)
        for batch in loader:
            if kill and during == "step" and progress.step == kill_step:
                os.kill(os.getpid(), signal.SIGKILL)
            indices = " ".join(str(int(i)) for i in batch["index"])
            log.write(f"{attempt} {rank} {progress.step} {indices}\n")
            log.flush()
            loss = torch.nn.functional.mse_loss(model(batch["x"]).squeeze(-1), batch["y"])
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            progress.step += 1
            if progress.step % EVERY == 0:
                accelerator.save_state()
            if progress.step == stop_step:
                print(f"rank {rank} stopped at step {stop_step}", flush=True)
                return
        progress.epoch += 1
    if accelerator.is_main_process:
        state = accelerator.unwrap_model(model).state_dict()
        weights = {k: v.contiguous() for k, v in state.items()}
        save_file(weights, os.path.join(project_dir, "final.safetensors"))
    accelerator.wait_for_everyone()
    print(f"rank {rank} finished at step {progress.step}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1])

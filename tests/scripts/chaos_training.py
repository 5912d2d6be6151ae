"""The training run of the chaos soak (``tools/chaos.py``): it checkpoints every few steps,
resumes from the newest complete checkpoint, and, when told, is hit by a fault at a chosen
moment.

Arguments: ``project_dir out_dir``. The checkpoints go to ``project_dir``; the logs and the
final states to ``out_dir`` (so that a small disk under ``project_dir`` holds checkpoints only).

Environment:

- ``CHAOS_EVERY``: a checkpoint every that many steps (default 3).
- ``CHAOS_ASYNC``: ``1`` for asynchronous saves (``ProjectConfiguration(async_save=True)``).
- ``CHAOS_LIMIT``: ``total_limit`` of the checkpoints (default: none).
- ``CHAOS_LAUNCH``: how many times the job was launched before (the injector's reruns); a
  fault hits only the first launch.
- ``CHAOS_FAULT``: ``kind:rank:step:moment``, on attempt 0 (``TORCHELASTIC_RESTART_COUNT``):

  - ``step``: that rank SIGKILLs itself at that step, at ``forward`` (before the forward),
    ``backward`` (after the backward, before the update) or ``update`` (after the update,
    before the step's checkpoint).
  - ``save``: it SIGKILLs itself inside the synchronous save of the first checkpoint at or
    after that step: at ``hook`` (the staging folder exists, nothing is written yet) or
    ``files-K`` (a thread watching the staging folder fires once it holds K files).
  - ``async``: the same inside the background write of an asynchronous save: the watching
    thread fires while the writer thread is alive and the staging folder holds K files.
  - ``load``: SIGKILL at that step (at ``forward``) on attempt 0, then SIGKILL inside the
    ``load_state`` of attempt 1 at ``hook`` (its pre-hook, in phase 1) or ``restore``
    (phase 2, while the registered counters take their state).
  - ``disk``: rank 0 fills the disk of ``project_dir`` just before the save of that step,
    leaving ``moment`` bytes free (less than a checkpoint needs), with ``<project_dir>/../
    filler.bin``, as another program would.

  When a watching thread misses its moment (the save finished first), the process kills itself
  right after the save returns instead, and says so. Every fault prints one ``chaos:`` line.

Each process appends ``<rank> <step> <sample indices>`` to ``<out_dir>/batches_<rank>.log``
before each step's update (the last line of a step is the one that counted); the main process
writes ``final.safetensors`` (the weights) and ``final_optimizer.safetensors`` (the momentum
buffers and the counters) into ``out_dir``.
"""

import os
import signal
import sys
import threading
import time

import torch
from accel import Accelerator
from accel.utils import ProjectConfiguration, set_seed
from restartable_training import EPOCHS, Indexed, Progress  # beside this script
from safetensors.torch import save_file
from torch.utils.data import DataLoader


def die(rank: int, what: str) -> None:
    """Say where the fault hits, then SIGKILL this process."""
    print(f"chaos: SIGKILL rank {rank} {what}", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)


class StageWatcher:
    """A thread that SIGKILLs this process once a save is writing and its staging folder holds
    ``files`` files (the ``.accel_staging`` marker not counted).

    ``writer`` True: it fires only while accel's background writer thread is alive (an
    asynchronous save); else while the saving thread is inside ``save_state``.
    """

    def __init__(self, folder: str, rank: int, files: int, writer: bool) -> None:
        self.folder, self.rank, self.files, self.writer = folder, rank, files, writer
        self.armed = threading.Event()
        self.saving = threading.Event()
        threading.Thread(target=self._watch, daemon=True).start()

    def _writing(self) -> bool:
        if not self.writer:
            return self.saving.is_set()
        return any(t.name.startswith("accel-save") and t.is_alive() for t in threading.enumerate())

    def _watch(self) -> None:
        self.armed.wait()
        while True:
            if self._writing():
                for name in os.listdir(self.folder) if os.path.isdir(self.folder) else []:
                    if name.startswith(".checkpoint_") and name.endswith(".partial"):
                        stage = os.path.join(self.folder, name)
                        try:
                            held = [f for f in os.listdir(stage) if f != ".accel_staging"]
                        except FileNotFoundError:
                            continue
                        if len(held) >= self.files:
                            kind = "background write" if self.writer else "synchronous save"
                            die(self.rank, f"during the {kind} of {name} ({len(held)} files)")
            time.sleep(0.0002)


def main(project_dir: str, out_dir: str) -> None:
    set_seed(0)
    every = int(os.environ.get("CHAOS_EVERY", "3"))
    limit = os.environ.get("CHAOS_LIMIT")
    config = ProjectConfiguration(
        project_dir=project_dir,
        automatic_checkpoint_naming=True,
        total_limit=int(limit) if limit else None,
        async_save=os.environ.get("CHAOS_ASYNC") == "1",
    )
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
    kind, fault_rank, fault_step, moment = (os.environ.get("CHAOS_FAULT") or "none:-1:-1:").split(
        ":"
    )
    first_launch = os.environ.get("CHAOS_LAUNCH", "0") == "0"
    mine = first_launch and int(fault_rank) == rank
    at = int(fault_step)
    watcher = None
    if mine and attempt == 0 and kind in ("save", "async") and moment.startswith("files-"):
        folder = os.path.join(project_dir, "checkpoints")
        watcher = StageWatcher(folder, rank, int(moment[len("files-") :]), kind == "async")
    if mine and attempt == 0 and kind == "save" and moment == "hook":

        def die_in_save(models, weights, folder):
            if progress.step >= at:
                die(rank, f"in the save pre-hook of {os.path.basename(folder)}")

        accelerator.register_save_state_pre_hook(die_in_save)
    if mine and attempt == 1 and kind == "load":
        if moment == "hook":
            accelerator.register_load_state_pre_hook(
                lambda models, folder: die(rank, "in the load_state pre-hook (phase 1)")
            )
        else:
            restore = progress.load_state_dict

            def die_in_restore(state: dict) -> None:
                restore(state)
                die(rank, "while load_state restores the registered counters (phase 2)")

            progress.load_state_dict = die_in_restore  # type: ignore[method-assign]
    accelerator.load_state("latest")
    log = open(os.path.join(out_dir, f"batches_{rank}.log"), "a", encoding="utf-8")
    print(f"attempt {attempt} rank {rank} resumes at step {progress.step}", flush=True)
    hit = mine and attempt == 0
    handle = None
    while progress.epoch < EPOCHS:
        if hasattr(loader, "set_epoch"):
            loader.set_epoch(progress.epoch)
        for batch in loader:
            before = kind == "load" or (kind == "step" and moment == "forward")
            if hit and before and progress.step == at:
                if kind == "load" and handle is not None and hasattr(handle, "wait"):
                    handle.wait()  # the restart must find a checkpoint to be killed loading
                die(rank, f"before the forward of step {at}")
            indices = " ".join(str(int(i)) for i in batch["index"])
            loss = torch.nn.functional.mse_loss(model(batch["x"]).squeeze(-1), batch["y"])
            accelerator.backward(loss)
            if hit and kind == "step" and progress.step == at and moment == "backward":
                die(rank, f"after the backward of step {at}")
            log.write(f"{rank} {progress.step} {indices}\n")
            log.flush()
            optimizer.step()
            optimizer.zero_grad()
            if hit and kind == "step" and progress.step == at and moment == "update":
                die(rank, f"after the update of step {at}")
            progress.step += 1
            if progress.step % every:
                continue
            if hit and kind == "disk" and rank == 0 and progress.step >= at:
                fill_disk(project_dir, int(moment))
                hit = False
            armed = watcher is not None and progress.step >= at
            if armed:
                watcher.saving.set()
                watcher.armed.set()
            handle = accelerator.save_state()
            if armed and kind == "async":
                handle.wait()  # the watcher looks every 0.2 ms while the writer thread runs
            if armed:
                time.sleep(0.01)
                die(rank, f"after the save of step {progress.step} (the watcher missed it)")
        progress.epoch += 1
    accelerator.end_training()
    if accelerator.is_main_process:
        state = accelerator.unwrap_model(model).state_dict()
        save_file({k: v.contiguous() for k, v in state.items()}, f"{out_dir}/final.safetensors")
        buffers = {
            f"momentum_{i}": s["momentum_buffer"].contiguous()
            for i, s in optimizer.state_dict()["state"].items()
        }
        buffers["progress"] = torch.tensor([progress.epoch, progress.step])
        save_file(buffers, f"{out_dir}/final_optimizer.safetensors")
    accelerator.wait_for_everyone()
    print(f"rank {rank} finished at step {progress.step}", flush=True)


def fill_disk(project_dir: str, leave: int) -> None:
    """Fill the disk that holds ``project_dir`` until ``leave`` bytes are free."""
    path = os.path.join(os.path.dirname(os.path.abspath(project_dir)), "filler.bin")
    free = os.statvfs(project_dir).f_bavail * os.statvfs(project_dir).f_frsize
    with open(path, "wb") as handle:
        handle.write(b"\0" * max(0, free - leave))
    print(f"chaos: filled the disk of {project_dir}, {leave} bytes left", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

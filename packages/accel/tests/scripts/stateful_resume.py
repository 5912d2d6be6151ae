"""``full OUT WORKERS [dispatch]``: train uninterrupted with a stateful loader (random sampler, workers
that augment from their own generator), saving mid-epoch at step SAVE_AT. ``resume OUT
WORKERS [dispatch]``: a fresh process loads that checkpoint, trains to the end and checks that it saw the
same batches and ends with bit-identical weights."""

import os
import sys

import torch
from accel_state import AcceleratorState, GradientState, set_seed
from torch.utils.data import DataLoader, Dataset, get_worker_info

from accel import Accelerator
from accel.utils import DataLoaderConfiguration, ProjectConfiguration

MODE, OUT, WORKERS = sys.argv[1], sys.argv[2], int(sys.argv[3])
DISPATCH = sys.argv[4:] == ["dispatch"]  # the main process reads, every process gets a slice
EPOCHS, SAMPLES, BATCH = 2, 36, 3
SAVE_AT = 8  # mid-epoch on one process (12 steps per epoch) and on two (6 per epoch)


class AugmentingDataset(Dataset):
    """Features plus noise from a generator that each worker seeds and keeps."""

    def __init__(self):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(SAMPLES, 4, generator=g)
        self.y = self.x @ torch.tensor([[1.0], [-2.0], [3.0], [0.5]])
        self._generator = None

    def __len__(self):
        return SAMPLES

    def _rng(self):
        if self._generator is None:
            info = get_worker_info()
            self._generator = torch.Generator().manual_seed(info.seed if info else 7)
        return self._generator

    def __getitem__(self, i):
        return i, self.x[i] + 0.1 * torch.randn(4, generator=self._rng()), self.y[i]

    def state_dict(self):
        return {"rng": self._rng().get_state()}

    def load_state_dict(self, state):
        self._rng().set_state(state["rng"])


def setup(seed):
    AcceleratorState._reset_state(reset_partial_state=True)
    GradientState._reset_state()
    acc = Accelerator(
        project_config=ProjectConfiguration(project_dir=OUT, automatic_checkpoint_naming=True),
        dataloader_config=DataLoaderConfiguration(
            use_stateful_dataloader=True, dispatch_batches=DISPATCH
        ),
    )
    set_seed(seed)
    model = torch.nn.Sequential(
        torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Dropout(0.2), torch.nn.Linear(16, 1)
    )
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05)
    loader = DataLoader(AugmentingDataset(), batch_size=BATCH, shuffle=True, num_workers=WORKERS)
    return acc, *acc.prepare(model, optimizer, loader)


def train(acc, model, optimizer, loader, start_step=0, save_at=None):
    seen, step = [], start_step
    epoch = step // STEPS_PER_EPOCH
    while epoch < EPOCHS:
        for idx, x, y in loader:
            loss = torch.nn.functional.mse_loss(model(x), y)
            acc.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
            step += 1
            seen.append(torch.cat([idx.float().unsqueeze(1), x], dim=1))
            if save_at is not None and step == save_at:
                acc.save_state()
        epoch += 1
    return seen, step


def weights(acc, model):
    return {k: v.detach().clone() for k, v in acc.get_state_dict(model).items()}


rank = int(os.environ.get("RANK", "0"))
if MODE == "full":
    acc, model, optimizer, loader = setup(seed=1)
    STEPS_PER_EPOCH = len(loader)
    seen, _ = train(acc, model, optimizer, loader, save_at=SAVE_AT)
    torch.save({"seen": seen[SAVE_AT:], "weights": weights(acc, model)}, f"{OUT}/full_{rank}.pt")
else:
    acc, model, optimizer, loader = setup(seed=777)
    STEPS_PER_EPOCH = len(loader)
    acc.load_state()
    assert len(loader) == STEPS_PER_EPOCH - SAVE_AT % STEPS_PER_EPOCH, "len: the rest of the epoch"
    if rank == 0 or not DISPATCH:  # a dispatching loader reads on the main process only
        assert loader.state_dict()["dataloader_state"] is not None, "no worker state restored"
    seen, _ = train(acc, model, optimizer, loader, start_step=SAVE_AT)
    full = torch.load(f"{OUT}/full_{rank}.pt", weights_only=True)
    assert len(seen) == len(full["seen"]), (len(seen), len(full["seen"]))
    assert all(torch.equal(a, b) for a, b in zip(seen, full["seen"])), "batches differ"
    mine = weights(acc, model)
    assert all(torch.equal(full["weights"][k], mine[k]) for k in mine), "weights differ"
    print(f"PASSED stateful_resume rank={rank} workers={WORKERS}", flush=True)

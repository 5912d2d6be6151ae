"""What transformers' ``Trainer`` calls on the Accelerator at the start of every ``train()``:
``free_memory``. (Its LOMO path is tested with ``lomo_backward`` in ``test_accelerator.py``.)"""

import gc

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

"""Smoke run of accel-data installed alone: a prepared loader on one process, and resuming it
part-way through an epoch.

Run: ``python tools/smoke/accel-data.py`` (prints ``ok: accel-data`` on success).
"""

from __future__ import annotations

import torch
from accel_data import prepare_data_loader, skip_first_batches
from accel_state import PartialState
from torch.utils.data import DataLoader, TensorDataset


def main() -> None:
    PartialState(cpu=True)
    dataset = TensorDataset(torch.arange(10.0).unsqueeze(1))
    loader = prepare_data_loader(DataLoader(dataset, batch_size=4), put_on_device=True)
    batches = [b[0].squeeze(1).tolist() for b in loader]
    assert batches == [[0.0, 1.0, 2.0, 3.0], [4.0, 5.0, 6.0, 7.0], [8.0, 9.0]], batches
    assert len(loader) == 3
    rest = [b[0].squeeze(1).tolist() for b in skip_first_batches(loader, 2)]
    assert rest == [[8.0, 9.0]], rest
    print("ok: accel-data")


if __name__ == "__main__":
    main()

"""Smoke run of accel-collectives installed alone: the collectives on one process.

Run: ``python tools/smoke/accel-collectives.py`` (prints ``ok: accel-collectives`` on success).
"""

from __future__ import annotations

import torch
from accel_collectives import (
    broadcast,
    gather,
    gather_object,
    pad_across_processes,
    recursively_apply,
    reduce,
    send_to_device,
)
from accel_state import PartialState


def main() -> None:
    PartialState(cpu=True)
    batch = {"x": torch.arange(6.0).reshape(3, 2), "labels": [torch.tensor([1, 2, 3])]}
    gathered = gather(batch)
    torch.testing.assert_close(gathered["x"], batch["x"])
    torch.testing.assert_close(gathered["labels"][0], batch["labels"][0])
    assert gather_object([{"rank": 0}]) == [{"rank": 0}]
    torch.testing.assert_close(reduce(torch.ones(2), reduction="sum"), torch.ones(2))
    torch.testing.assert_close(broadcast(torch.full((2,), 3.0)), torch.full((2,), 3.0))
    torch.testing.assert_close(pad_across_processes(torch.ones(2, 3), dim=1), torch.ones(2, 3))
    moved = send_to_device(batch, "cpu")
    assert moved["x"].device.type == "cpu"
    doubled = recursively_apply(lambda t: t * 2, batch)
    torch.testing.assert_close(doubled["x"], batch["x"] * 2)
    print("ok: accel-collectives")


if __name__ == "__main__":
    main()

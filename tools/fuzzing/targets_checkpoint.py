"""Targets of ``load_state``: every file of a folder saved by accel's ``save_state`` (its
manifest alone too), and every file of one saved by the reference library (accelerate 1.15)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

from ._files import apply, multi_seeds, once
from .registry import Context, register

# The same objects in the saving and the loading run: both layouts are loaded into them.
_OBJECTS = """
import torch
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU(), torch.nn.Linear(3, 2))
optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1)
loader = torch.utils.data.DataLoader(list(range(8)), batch_size=2, shuffle=True)
"""

_REFERENCE_SAVE = (
    "import sys\nfrom accelerate import Accelerator\n"
    + _OBJECTS
    + textwrap.dedent(
        """
        acc = Accelerator(cpu=True)
        model, optimizer, scheduler, loader = acc.prepare(model, optimizer, scheduler, loader)
        model(torch.ones(2, 4)).sum().backward(); optimizer.step(); scheduler.step()
        for _ in loader: break
        acc.save_state(sys.argv[1])
        """
    )
)


def _accelerator() -> tuple[Any, dict[str, Any]]:
    from accel import Accelerator

    scope: dict[str, Any] = {}
    exec(_OBJECTS, scope)
    acc = Accelerator(cpu=True)
    prepared = acc.prepare(scope["model"], scope["optimizer"], scope["scheduler"], scope["loader"])
    return acc, dict(zip(("model", "optimizer", "scheduler", "loader"), prepared))


def _accel_prepare(root: Path) -> Context:
    acc, objs = _accelerator()

    def write(folder: Path) -> None:
        import torch

        objs["model"](torch.ones(2, 4)).sum().backward()
        objs["optimizer"].step()
        objs["scheduler"].step()
        acc.save_state(str(folder / "ckpt"))

    folder = once(root / "accel_state", write) / "ckpt"
    seeds, fmt = multi_seeds(folder)
    return Context(seeds, fmt, (folder, acc))


def _reference_prepare(root: Path) -> Context:
    def write(folder: Path) -> None:
        env = {k: v for k, v in os.environ.items() if k != "ACCEL_AS_ACCELERATE"}
        subprocess.run(
            [sys.executable, "-c", _REFERENCE_SAVE, str(folder / "ckpt")],
            env=env,
            check=True,
            timeout=300,
            capture_output=True,
        )

    folder = once(root / "reference_state", write) / "ckpt"
    acc, _ = _accelerator()
    seeds, fmt = multi_seeds(folder)
    return Context(seeds, fmt, (folder, acc))


def _load_run(ctx: Context, data: bytes, scratch: Path) -> None:
    folder, acc = ctx.state
    acc.load_state(str(apply(folder, data, scratch)))


register(
    "load_state",
    "every file of a folder accel's `save_state` wrote (manifest, weights, optimizer, scheduler, "
    "sampler, random states): `Accelerator.load_state`",
    _accel_prepare,
    _load_run,
)
register(
    "load_state_reference",
    "every file of a folder accelerate 1.15's `save_state` wrote (`_reference_layout.py`): "
    "`Accelerator.load_state`",
    _reference_prepare,
    _load_run,
)


def _manifest_prepare(root: Path) -> Context:
    ctx = _accel_prepare(root)
    return Context([(ctx.state[0] / "accel_checkpoint.json").read_bytes()], "json")


def _manifest_run(ctx: Context, data: bytes, scratch: Path) -> None:
    from accel._training_checkpoints.files._manifest import parse_manifest

    parse_manifest(data, "accel_checkpoint.json")


register(
    "checkpoint_manifest",
    "`accel_checkpoint.json` alone: `parse_manifest`",
    _manifest_prepare,
    _manifest_run,
)
